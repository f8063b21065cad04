"""Baseline files: baselines/<target>/<server>.json, written atomically and deterministically.

Layout (format 2): per concurrency, one entry per workload key.

    {"format": 2, "target": "NVIDIA-H200", "server": "qwen3.6-35b-a3b-fp8-mtp",
     "concurrency": {"8": {"endpoint=completions ... max_tokens=256 ...": {
         "workload": {...}, "provenance": {...},
         "metrics": {"decode_tok_s": {"value": 407.9, "samples": [...],
                                      "spread": 0.012, "direction": "higher"}},
         "requests": ["17 263 256 86 412.5 17030.2", ...],
         "outputs": ["17 length 3f2a9c1b0d4e", ...]}}}}

- key: `workload_key`, every workload value but WHERE_KEYS, as sorted `name=value`; the
  same workload run elsewhere is one entry (comparing refuses, recording replaces it).
- value = median of the samples; spread = (max - min) / |median| (0 for one sample,
  null when the median is 0).
- requests: per request in dispatch order, prompt index, prompt tokens, output tokens,
  chunks, TTFT ms, E2EL ms (metrics/uncertainty.py); outputs: prompt index, finish
  reason, 12-character sha256 of the text (metrics/crosscheck.py). Files without them
  load; the checks that need them are noted as not run.
- Concurrency keys in numeric order, others alphabetical; numbers to 6 significant
  digits; indent 2, trailing newline: the same data gives byte-identical files.
- Format 1 files (`"8": {"workload": ...}`) load; the next record writes format 2.

Published figures (baselines/published/<server>.json) are hand-curated and report-only,
kept apart so --update-baselines never rewrites them.
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # POSIX advisory locks; elsewhere writes are still atomic, just not serialized
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # None: no locks on this platform

from pytest_llmperf.baselines.comparable import check_compatible
from pytest_llmperf.metrics.crosscheck import decode_outputs
from pytest_llmperf.metrics.registry import Direction, UnknownMetric, metric
from pytest_llmperf.metrics.uncertainty import decode_rows
from pytest_llmperf.stats.median import median_and_range
from pytest_llmperf.util.files import atomic_write_text
from pytest_llmperf.util.secrets import strip_secrets

FORMAT = 2
READ_FORMATS = (1, 2)  # format 1: one entry per concurrency, keyed here by its workload
PUBLISHED_FORMAT = 1
SIG_DIGITS = 6
PUBLISHED_DIR = "published"


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# --- names and numbers -------------------------------------------------------------


def sanitize_name(name: str) -> str:
    """A file-system-safe name: "NVIDIA H200" -> "NVIDIA-H200", "Qwen/Qwen3.6" -> "Qwen-Qwen3.6"."""
    if not isinstance(name, str):
        raise ValueError(f"a target or server name must be a string, got {name!r}")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip())
    safe = re.sub(r"-{2,}", "-", safe).strip("-.")
    if not safe:
        raise ValueError(f"{name!r} is not usable as a file name (nothing left after sanitizing)")
    return safe


def stable_float(x: float) -> float:
    """Round to SIG_DIGITS significant digits so reruns format identically."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):  # numpy scalars are Real
        raise ValueError(f"expected a number, got {x!r}")
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {x!r}")
    r = float(f"{float(x):.{SIG_DIGITS}g}")
    return 0.0 if r == 0 else r  # no "-0.0" in files


# --- entries by workload ------------------------------------------------------------

# Where a run ran, not what it asked: outside an entry's key, so a change is refused.
WHERE_KEYS = frozenset({"concurrency", "model", "dataset", "clock_speed"})


def workload_key(workload: Mapping[str, Any]) -> str:
    """The key of a workload's entry: "endpoint=completions ignore_eos=false max_seconds=60
    max_tokens=256 num_prompts=16 profile=smoke seed=0 warmup=2" (every value but
    WHERE_KEYS, sorted by name; None is null, whole floats are written as integers)."""
    parts = [f"{name}={_key_value(workload[name])}" for name in sorted(workload) if name not in WHERE_KEYS]
    return " ".join(parts) or "default"


def _key_value(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        return str(int(float(value)))
    if isinstance(value, str):
        return value
    return json.dumps(_plain(value, "workload"), sort_keys=True, separators=(",", ":"))


# --- deterministic JSON ------------------------------------------------------------


def _plain(value: Any, where: str) -> Any:
    """JSON-able copy with sorted keys; rejects NaN/inf and non-JSON types up front."""
    if isinstance(value, Mapping):
        return {str(k): _plain(value[k], f"{where}.{k}") for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} cannot be stored (not a finite number)")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, numbers.Integral):  # numpy integers
        return int(value)
    if isinstance(value, numbers.Real):
        return _plain(float(value), where)
    if isinstance(value, Path):
        return value.as_posix()
    raise ValueError(f"{where}: {type(value).__name__} {value!r} cannot be stored in JSON")


def _by_concurrency(entries: Mapping[int, Any]) -> dict[str, Any]:
    return {str(c): entries[c] for c in sorted(entries)}


def _dump(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False) + "\n"


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Serialize read-modify-write of files in `directory`; locks the directory itself (no lock file)."""
    directory.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# --- validation on load -------------------------------------------------------------


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(path, f"not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise BaselineError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not text.strip():
        raise BaselineError(path, "empty file")
    try:
        return json.loads(text, parse_constant=lambda c: _reject_constant(path, c))
    except json.JSONDecodeError as exc:
        raise BaselineError(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _reject_constant(path: Path, name: str) -> Any:
    raise BaselineError(path, f"contains {name}, which is not a valid number in a baseline")


def _concurrency_key(path: Path, key: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]*", key):
        raise BaselineError(path, f"concurrency key {key!r} is not a positive integer")
    return int(key)


def _check_keys(path: Path, where: str, obj: Mapping[str, Any], allowed: set[str]) -> None:
    """Unknown keys are refused: a hand-added "tolerance" would otherwise be silently ignored."""
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BaselineError(
            path,
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed))} (tolerances belong in the "
            "test's marker or the project's ini, not in the baseline)",
        )


def _check_header(path: Path, doc: Any, kind_fields: Mapping[str, str], formats: Sequence[int]) -> None:
    if not isinstance(doc, dict):
        raise BaselineError(path, f"expected a JSON object at the top level, got {type(doc).__name__}")
    _check_keys(path, "top level", doc, {"format", "concurrency", "note", *kind_fields})
    if isinstance(doc.get("format"), bool) or doc.get("format") not in formats:
        readable = " or ".join(map(str, formats))
        raise BaselineError(path, f"unsupported format {doc.get('format')!r} (this plugin reads format {readable})")
    for key, expected in kind_fields.items():
        if doc.get(key) != expected:
            raise BaselineError(
                path,
                f"{key!r} is {doc.get(key)!r} but the file's location says {expected!r}; "
                "was it copied from another target or server?",
            )
    if not isinstance(doc.get("concurrency"), dict):
        raise BaselineError(path, "missing or invalid 'concurrency' section (expected an object)")


def _check_metric(path: Path, where: str, name: str, m: Any) -> None:
    if not isinstance(m, dict):
        raise BaselineError(path, f"{where}: expected an object, got {m!r}")
    for key in ("value", "samples", "spread", "direction"):
        if key not in m:
            raise BaselineError(path, f"{where}: missing {key!r}")
    _check_keys(path, where, m, {"value", "samples", "spread", "direction"})
    if not _is_number(m["value"]):
        raise BaselineError(path, f"{where}.value must be a finite number, got {m['value']!r}")
    samples = m["samples"]
    if not isinstance(samples, list) or not samples or not all(_is_number(s) for s in samples):
        raise BaselineError(path, f"{where}.samples must be a non-empty list of numbers, got {samples!r}")
    if m["spread"] is not None and not (_is_number(m["spread"]) and m["spread"] >= 0):
        raise BaselineError(path, f"{where}.spread must be a number >= 0 or null, got {m['spread']!r}")
    try:
        direction = Direction.parse(m["direction"])
    except ValueError as exc:
        raise BaselineError(path, f"{where}.direction: {exc}") from None
    try:
        known = metric(name).direction
    except UnknownMetric as exc:
        raise BaselineError(path, f"{where}: {exc}") from None
    if direction is not known:
        raise BaselineError(path, f"{where}.direction is {direction.value!r} but {name} is {known.value}-is-better")
    median, _ = median_and_range(samples)
    if not math.isclose(m["value"], median, rel_tol=1e-5, abs_tol=1e-9):
        raise BaselineError(
            path,
            f"{where}.value {m['value']!r} is not the median of its samples "
            f"({stable_float(median)!r}); re-record with --update-baselines, or edit "
            "value and samples together",
        )


def _check_entry(path: Path, where: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise BaselineError(path, f"{where}: expected an object, got {type(entry).__name__}")
    for section in ("workload", "provenance", "metrics"):
        if not isinstance(entry.get(section), dict):
            raise BaselineError(path, f"{where}: missing or invalid {section!r} (expected an object)")
    _check_keys(path, where, entry, {"workload", "provenance", "metrics", "requests", "outputs"})
    for name, m in entry["metrics"].items():
        _check_metric(path, f"{where}.metrics.{name}", name, m)
    if "requests" in entry:
        if not isinstance(entry["requests"], list):
            raise BaselineError(
                path, f"{where}.requests must be a list of lines, got {type(entry['requests']).__name__}"
            )
        try:
            decode_rows(entry["requests"])
        except ValueError as exc:
            raise BaselineError(path, f"{where}.requests: {exc}") from None
    if "outputs" in entry:
        if not isinstance(entry["outputs"], list):
            raise BaselineError(path, f"{where}.outputs must be a list of lines, got {type(entry['outputs']).__name__}")
        try:
            decode_outputs(entry["outputs"])
        except ValueError as exc:
            raise BaselineError(path, f"{where}.outputs: {exc}") from None


def _entries_of(path: Path, doc: dict[str, Any]) -> dict[int, dict[str, dict[str, Any]]]:
    """The file's entries by concurrency and workload key, each checked."""
    entries: dict[int, dict[str, dict[str, Any]]] = {}
    for level, section in doc["concurrency"].items():
        concurrency = _concurrency_key(path, level)
        if doc["format"] == 1:  # one entry per concurrency: its workload gives its key
            _check_entry(path, f"concurrency[{level}]", section)
            entries[concurrency] = {workload_key(section["workload"]): section}
            continue
        if not isinstance(section, dict) or not section:
            raise BaselineError(
                path, f"concurrency[{level}]: expected an object of entries by workload key, got {section!r}"
            )
        for key, entry in section.items():
            where = f"concurrency[{level}][{key!r}]"
            _check_entry(path, where, entry)
            expected = workload_key(entry["workload"])
            if key != expected:
                raise BaselineError(
                    path,
                    f"{where}: the key does not match the entry's workload, whose key is {expected!r}; "
                    "rename the key (or fix the workload) by hand, or delete the entry and re-record it "
                    "with --update-baselines",
                )
        entries[concurrency] = dict(section)
    return entries


# --- the files ----------------------------------------------------------------------


@dataclass
class BaselineFile:
    path: Path
    target: str
    server: str
    # {concurrency: {workload key: {"workload": {...}, "provenance": {...},
    #                "metrics": {name: {"value", "samples", "spread", "direction"}}}}}
    entries: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def entry(self, concurrency: int, workload: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The entry for `workload` at `concurrency`, or None. Without a workload: the only
        entry there (ValueError when there are several)."""
        at = self.entries.get(int(concurrency), {})
        if workload is not None:
            return at.get(workload_key(workload))
        if len(at) > 1:
            raise ValueError(
                f"{self.path}: concurrency {concurrency} has {len(at)} entries, one per workload; name the workload"
            )
        return next(iter(at.values()), None)

    def others(self, concurrency: int, workload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The entries at `concurrency` recorded under another workload than `workload`."""
        key = workload_key(workload)
        return [entry for k, entry in self.entries.get(int(concurrency), {}).items() if k != key]

    def metric(self, concurrency: int, name: str, workload: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        entry = self.entry(concurrency, workload)
        return entry["metrics"].get(name) if entry else None

    def value(self, concurrency: int, name: str, workload: Mapping[str, Any] | None = None) -> float | None:
        m = self.metric(concurrency, name, workload)
        return m["value"] if m else None

    def to_document(self) -> dict[str, Any]:
        return {
            "concurrency": _by_concurrency(
                {c: _plain(at, f"concurrency[{c}]") for c, at in self.entries.items() if at}
            ),
            "format": FORMAT,
            "server": self.server,
            "target": self.target,
        }

    def to_json(self) -> str:
        return _dump(self.to_document())


@dataclass
class PublishedFile:
    """Report-only reference figures for a server, from a published write-up."""

    path: Path
    server: str
    # {concurrency: {"figures": {metric: value}, "source": str, "note": str}}
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)

    def figures(self, concurrency: int) -> dict[str, float]:
        entry = self.entries.get(int(concurrency))
        return dict(entry["figures"]) if entry else {}

    def to_json(self) -> str:
        return _dump(
            {
                "concurrency": _by_concurrency({c: _plain(e, f"concurrency[{c}]") for c, e in self.entries.items()}),
                "format": PUBLISHED_FORMAT,
                "kind": "published-reference",
                "note": "Published figures, report-only: shown beside measured values, never gating.",
                "server": self.server,
            }
        )


def _positive_concurrency(concurrency: Any) -> int:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    return concurrency


def _entry_update(
    concurrency: int,
    metrics: Mapping[str, Sequence[float | None] | float | None],
    workload: Mapping[str, Any],
    provenance: Mapping[str, Any],
    requests: list[str] | None,
    outputs: list[str] | None,
) -> Callable[[BaselineFile], None]:
    """The record of one run as an update of its baseline file, its values checked now."""
    workload = _plain(dict(workload), "workload")
    provenance = _plain(strip_secrets(dict(provenance)), "provenance")
    new_metrics = {}
    for name, raw in metrics.items():
        given: list[Any] = list(raw) if isinstance(raw, (list, tuple)) else [raw]  # stable_float checks each
        present = [s for s in given if s is not None]
        if not present:
            continue
        try:
            samples = [stable_float(s) for s in present]
        except ValueError as exc:
            raise ValueError(f"metric {name}: {exc}") from None
        median, spread = median_and_range(samples)
        new_metrics[name] = {
            "direction": metric(name).direction.value,
            "samples": samples,
            "spread": None if spread is None else stable_float(spread),
            "value": stable_float(median),
        }
    request_lines = [str(line) for line in requests] if requests is not None else None
    output_lines = [str(line) for line in outputs] if outputs is not None else None
    key = workload_key(workload)

    def update(current: BaselineFile) -> None:
        at = current.entries.setdefault(concurrency, {})
        old = at.get(key)
        kept: dict[str, Any] = {}
        kept_requests = kept_outputs = None
        if old and not check_compatible(old["workload"], workload, old["provenance"], provenance):
            kept = dict(old["metrics"])
            kept_requests, kept_outputs = old.get("requests"), old.get("outputs")
        kept.update(new_metrics)
        entry: dict[str, Any] = {"metrics": kept, "provenance": provenance, "workload": workload}
        if (lines := request_lines if request_lines is not None else kept_requests) is not None:
            entry["requests"] = lines
        if (out := output_lines if output_lines is not None else kept_outputs) is not None:
            entry["outputs"] = out
        at[key] = entry

    return update


class BaselineStore:
    """Baseline files under `root`; `deferred`: records are queued until `flush()`, and
    `load` and `entries_at` read the files as the queue will leave them."""

    def __init__(self, root: Path | str, *, deferred: bool = False):
        self.root = Path(root)
        self.deferred = deferred
        self._pending: dict[tuple[str, str], list[Callable[[BaselineFile], None]]] = {}
        self.written: list[Path] = []  # every file flush() wrote, in order

    def path_for(self, target: str, server: str) -> Path:
        target_dir = sanitize_name(target)
        if target_dir == PUBLISHED_DIR:
            raise ValueError(f"target name {target!r} is reserved for published reference figures")
        return self.root / target_dir / f"{sanitize_name(server)}.json"

    def published_path_for(self, server: str) -> Path:
        return self.root / PUBLISHED_DIR / f"{sanitize_name(server)}.json"

    # -- baselines --

    def load(self, target: str, server: str) -> BaselineFile | None:
        """The baseline file (with the queued records), or None when there is none;
        BaselineError when it is unusable."""
        current = self._read(target, server)
        updates = self._pending.get((sanitize_name(target), sanitize_name(server)), [])
        if updates:
            current = current or self._empty(target, server)
            for update in updates:
                update(current)
        return current

    def _read(self, target: str, server: str) -> BaselineFile | None:
        path = self.path_for(target, server)
        if not path.exists():
            return None
        doc = _read_json(path)
        _check_header(path, doc, {"target": sanitize_name(target), "server": sanitize_name(server)}, READ_FORMATS)
        return BaselineFile(path=path, target=doc["target"], server=doc["server"], entries=_entries_of(path, doc))

    def _empty(self, target: str, server: str) -> BaselineFile:
        return BaselineFile(self.path_for(target, server), sanitize_name(target), sanitize_name(server))

    def servers_in(self, target: str) -> list[str]:
        """The servers with a baseline file (or queued records) in `target`'s folder."""
        folder = self.root / sanitize_name(target)
        on_disk = {path.stem for path in folder.glob("*.json")} if folder.is_dir() else set()
        queued = {server for t, server in self._pending if t == sanitize_name(target)}
        return sorted(on_disk | queued)

    def entries_at(self, target: str, concurrency: int) -> list[tuple[str, str, dict[str, Any]]]:
        """Every entry at `concurrency` in `target`'s folder, over all its servers' files, as
        (server, workload key, entry); a file that cannot be read is left out (its own test
        reports it)."""
        found: list[tuple[str, str, dict[str, Any]]] = []
        for server in self.servers_in(target):
            try:
                current = self.load(target, server)
            except BaselineError:
                continue
            if current is not None:
                found += [(current.server, key, e) for key, e in current.entries.get(int(concurrency), {}).items()]
        return found

    def record(
        self,
        target: str,
        server: str,
        concurrency: int,
        metrics: Mapping[str, Sequence[float | None] | float | None],
        workload: Mapping[str, Any],
        provenance: Mapping[str, Any],
        *,
        requests: list[str] | None = None,
        outputs: list[str] | None = None,
    ) -> BaselineFile:
        """Record one concurrency's metrics under `workload`'s key and write the file (or
        queue it, when deferred); other concurrencies and other workloads' entries are kept.

        Each metric is samples or one value; None samples are skipped, a metric with none
        is not recorded. Earlier metrics, `requests` and `outputs` (when None) of the same
        workload and hardware are kept; the key run elsewhere replaces the whole entry.
        """
        update = _entry_update(_positive_concurrency(concurrency), metrics, workload, provenance, requests, outputs)
        if self.deferred:
            current = self._writable(target, server, self.load)
            update(current)
            self._pending.setdefault((sanitize_name(target), sanitize_name(server)), []).append(update)
            return current
        path = self.path_for(target, server)
        with _directory_lock(path.parent):
            current = self._writable(target, server, self._read)
            update(current)
            atomic_write_text(path, current.to_json())
            return current

    def _writable(self, target: str, server: str, read: Callable[[str, str], BaselineFile | None]) -> BaselineFile:
        try:
            current = read(target, server)
        except BaselineError as exc:
            # Never overwrite what we cannot read: it may be someone's hand edit.
            raise BaselineError(exc.path, f"{exc.problem}; fix or delete the file, then record again") from None
        return current or self._empty(target, server)

    def flush(self) -> tuple[list[Path], list[str]]:
        """Write the queued records, each file re-read under its folder's lock; returns the
        files written and why others could not be."""
        written: list[Path] = []
        problems: list[str] = []
        pending, self._pending = self._pending, {}
        for (target, server), updates in pending.items():
            path = self.path_for(target, server)
            try:
                with _directory_lock(path.parent):
                    current = self._writable(target, server, self._read)
                    for update in updates:
                        update(current)
                    atomic_write_text(path, current.to_json())
                written.append(path)
            except (OSError, BaselineError) as exc:
                problems.append(f"{path}: not written: {exc}")
        self.written += written
        return written, problems

    def pending_entries(self) -> int:
        """How many records are queued."""
        return sum(len(updates) for updates in self._pending.values())

    def unused(self, target: str, server: str, asked: Collection[tuple[int, str]]) -> list[tuple[int, str]]:
        """The (concurrency, workload key) entries of `server`'s file that are not `asked` for."""
        current = self.load(target, server)
        if current is None:
            return []
        return sorted((c, key) for c, at in current.entries.items() for key in at if (c, key) not in asked)

    def prune(self, target: str, server: str, drop: Collection[tuple[int, str]]) -> int:
        """Remove the (concurrency, workload key) entries `drop` from `server`'s file (the
        file goes when nothing is left); how many were removed."""
        path = self.path_for(target, server)
        with _directory_lock(path.parent):
            current = self._read(target, server)
            if current is None:
                return 0
            removed = 0
            for concurrency, key in drop:
                if current.entries.get(concurrency, {}).pop(key, None) is not None:
                    removed += 1
            current.entries = {c: at for c, at in current.entries.items() if at}
            if not current.entries:
                path.unlink()
            elif removed:
                atomic_write_text(path, current.to_json())
            return removed

        # -- published reference figures --

    def load_published(self, server: str) -> PublishedFile | None:
        path = self.published_path_for(server)
        if not path.exists():
            return None
        doc = _read_json(path)
        _check_header(path, doc, {"kind": "published-reference", "server": sanitize_name(server)}, (PUBLISHED_FORMAT,))
        entries = {}
        for key, entry in doc["concurrency"].items():
            where = f"concurrency[{key}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("figures"), dict):
                raise BaselineError(path, f"{where}: expected an object with a 'figures' object")
            _check_keys(path, where, entry, {"figures", "source", "note"})
            if not isinstance(entry.get("source"), str) or not entry["source"].strip():
                raise BaselineError(path, f"{where}: missing 'source' (where the figures were published)")
            for name, v in entry["figures"].items():
                if not _is_number(v):
                    raise BaselineError(path, f"{where}.figures.{name} must be a finite number, got {v!r}")
            entries[_concurrency_key(path, key)] = entry
        return PublishedFile(path=path, server=doc["server"], entries=entries)

    def write_published(
        self, server: str, concurrency: int, figures: Mapping[str, float], source: str, note: str = ""
    ) -> PublishedFile:
        """Store report-only reference figures (e.g. the seeds' decode 407.9 tok/s at conc 32)."""
        concurrency = _positive_concurrency(concurrency)
        if not source or not source.strip():
            raise ValueError("published figures need a source (where they were published)")
        try:
            clean = {k: stable_float(v) for k, v in figures.items()}
        except ValueError as exc:
            raise ValueError(f"published figures: {exc}") from None
        path = self.published_path_for(server)
        with _directory_lock(path.parent):
            current = self.load_published(server) or PublishedFile(path, sanitize_name(server))
            current.entries[concurrency] = {"figures": clean, "note": note, "source": source}
            atomic_write_text(current.path, current.to_json())
        return current
