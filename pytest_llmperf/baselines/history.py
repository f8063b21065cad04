"""The history store: one JSON line per gated (server, concurrency, metric) per run.

Appended beside the baselines judged in (`baselines/<folder>/history.jsonl`) or at
`--llmperf-history PATH` (`off`: none), each append one O_APPEND write under an exclusive
flock so xdist workers' lines never tear; torn lines are skipped on reading. Keys in KEYS
order (docs/history.md says what each means and why JSON Lines, not SQLite).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.store import sanitize_name, stable_float

HISTORY_FILE = "history.jsonl"
OFF = "off"
# The keys of a line, in the order they are written.
KEYS = (
    "date",
    "server",
    "concurrency",
    "metric",
    "value",
    "noise",
    "confidence",
    "baseline",
    "outcome",
    "reps",
    "target",
    "image",
    "digest",
    "vllm",
    "commit",
    "sim",
    "workload",
)
REQUIRED = ("date", "server", "concurrency", "metric", "value", "outcome")
# Outcomes whose value is a trustworthy measurement (drift detection reads only these).
MEASURED_OUTCOMES = frozenset(
    {"pass", "improved", "regressed", "suspect", "inconclusive", "missing-baseline", "recorded"}
)


class HistoryError(ValueError):
    """A history file that cannot be read at all; the message names it and the fix."""


def default_path(baselines_root: Path, target: str) -> Path:
    """Beside the baselines of `target`: baselines/<folder>/history.jsonl."""
    return Path(baselines_root) / sanitize_name(target) / HISTORY_FILE


def workload_hash(identity: Mapping[str, Any]) -> str:
    """12 hex digits that tell workloads apart (concurrency excluded: it is its own key)."""
    plain = {k: v for k, v in identity.items() if k != "concurrency"}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return stable_float(number) if math.isfinite(number) else None


def make_record(
    *,
    server: str,
    concurrency: int,
    metric: str,
    value: float | None,
    outcome: str,
    target: str,
    provenance: Mapping[str, Any],
    workload: str,
    noise: float | None = None,
    confidence: float | None = None,
    baseline: float | None = None,
    reps: int | None = None,
) -> dict[str, Any] | None:
    """One line's dict (None when there is no value to keep)."""
    number = _number(value)
    if number is None:
        return None
    line: dict[str, Any] = {
        "date": provenance.get("date"),
        "server": server,
        "concurrency": int(concurrency),
        "metric": metric,
        "value": number,
        "noise": _number(noise) if noise else None,
        "confidence": confidence if noise else None,
        "baseline": _number(baseline),
        "outcome": str(outcome),
        "reps": reps,
        "target": target,
        "image": provenance.get("image"),
        "digest": provenance.get("image_digest"),
        "vllm": provenance.get("vllm_version"),
        "commit": provenance.get("git_commit"),
        # The simulator's "image": the flags it ran with (--llmperf-sim-args, the spec's).
        "sim": " ".join(map(str, provenance.get("sim_args") or ())) or None,
        "workload": workload,
    }
    return {k: line[k] for k in KEYS if line.get(k) is not None}


def encode(records: Iterable[Mapping[str, Any]]) -> bytes:
    """Whole lines, compact JSON, keys in KEYS order."""
    return b"".join(
        (json.dumps(dict(r), separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode()
        for r in records
    )


@contextlib.contextmanager
def _locked_append(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def append(path: Path | str, records: Sequence[Mapping[str, Any]]) -> int:
    """Append `records` as lines in one write under an exclusive lock (after a newline if the
    last line was torn); returns the lines written."""
    if not records:
        return 0
    data = encode(records)
    path = Path(path)
    with _locked_append(path) as fd:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:  # a regular file takes it in one write; a short write goes on, still locked
            view = view[os.write(fd, view) :]
    return len(records)


@dataclass
class History:
    """The lines of one or more history files, with the ones that could not be read."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path:line: why"
    paths: list[Path] = field(default_factory=list)


def _problem(line: Any) -> str | None:
    if not isinstance(line, dict):
        return "not a JSON object"
    missing = [k for k in REQUIRED if k not in line]
    if missing:
        return f"missing {', '.join(missing)}"
    if isinstance(line["value"], bool) or not isinstance(line["value"], (int, float)):
        return f"value {line['value']!r} is not a number"
    if isinstance(line["concurrency"], bool) or not isinstance(line["concurrency"], int):
        return f"concurrency {line['concurrency']!r} is not a whole number"
    return None


def read(paths: Iterable[Path | str]) -> History:
    """Every readable line of `paths` in file order (missing file: none; bad lines skipped
    and named); HistoryError when a path is not a readable file."""
    history = History()
    for path in map(Path, paths):
        if not path.exists():
            continue
        if path.is_dir():
            raise HistoryError(f"history {path} is a folder; give the history.jsonl file in it")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HistoryError(f"cannot read history {path}: {exc}") from None
        history.paths.append(path)
        for number, raw in enumerate(text.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                history.skipped.append(f"{path}:{number}: not JSON (a torn or hand-edited line)")
                continue
            problem = _problem(line)
            if problem:
                history.skipped.append(f"{path}:{number}: {problem}")
                continue
            history.records.append(line)
    return history


def find_files(root: Path | str) -> list[Path]:
    """Every history file under a baselines folder (one per target folder), or the file itself."""
    root = Path(root)
    if root.is_file():
        return [root]
    if not root.exists():
        return []
    return sorted(root.rglob(HISTORY_FILE))


SeriesKey = tuple[str, str, int, str, str]  # target, server, concurrency, metric, workload


def series(records: Iterable[Mapping[str, Any]]) -> dict[SeriesKey, list[dict[str, Any]]]:
    """The records by (target, server, concurrency, metric, workload), each in date order
    (the order of appending among equal dates); only outcomes whose value is a measurement."""
    out: dict[SeriesKey, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("outcome") not in MEASURED_OUTCOMES:
            continue
        key = (
            str(record.get("target", "")),
            str(record["server"]),
            int(record["concurrency"]),
            str(record["metric"]),
            str(record.get("workload", "")),
        )
        out.setdefault(key, []).append(dict(record))
    for lines in out.values():
        lines.sort(key=lambda r: str(r.get("date") or ""))  # stable: appends of one date keep their order
    return out
