"""The history as text: `llmperf history`'s trends and the nightly summary's drift lines.

Per (target, server, concurrency, metric, workload) series: a sparkline, latest value and
range, change points (baselines/drift.py) with the image at each, and sustained drift.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines import drift
from pytest_llmperf.baselines.history import History, SeriesKey, series
from pytest_llmperf.metrics.registry import format_value, is_known, metric
from pytest_llmperf.stats.outliers import NOISY

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60  # runs shown in a sparkline (the latest)


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """One bar per value, scaled between the shown values' min and max (flat: mid bars)."""
    shown = list(values)[-width:]
    if not shown:
        return ""
    low, high = min(shown), max(shown)
    if high - low <= 1e-12 * max(abs(high), 1.0):
        return BARS[3] * len(shown)
    return "".join(BARS[round((v - low) / (high - low) * (len(BARS) - 1))] for v in shown)


def _unit(name: str) -> str:
    return f" {metric(name).unit}" if is_known(name) else ""


def _value(name: str, value: float | None) -> str:
    return format_value(name, value) if is_known(name) else ("-" if value is None else f"{value:g}")


def _short_digest(digest: Any) -> str:
    text = str(digest)
    return text.split(":", 1)[-1][:12] if text else ""


def describe_run(line: Mapping[str, Any]) -> str:
    """What ran: image (digest), vLLM version, commit, date."""
    parts = []
    if line.get("image"):
        parts.append(f"image {line['image']}" + (f" ({_short_digest(line['digest'])})" if line.get("digest") else ""))
    if line.get("sim"):
        parts.append(f"sim {line['sim']}")
    if line.get("vllm"):
        parts.append(f"vLLM {line['vllm']}")
    if line.get("commit"):
        parts.append(f"commit {line['commit']}")
    if line.get("date"):
        parts.append(str(line["date"])[:10])
    return ", ".join(parts) or "no provenance"


def since_what(line: Mapping[str, Any]) -> str:
    """The flag's "since image X": the image (digest), else the vLLM version, else the commit."""
    if line.get("image"):
        return f"image {line['image']}" + (f" ({_short_digest(line['digest'])})" if line.get("digest") else "")
    if line.get("sim"):
        return f"sim {line['sim']} ({str(line.get('date', ''))[:10]})"
    if line.get("vllm"):
        return f"vLLM {line['vllm']} ({str(line.get('date', ''))[:10]})"
    if line.get("commit"):
        return f"commit {line['commit']} ({str(line.get('date', ''))[:10]})"
    return f"the run of {str(line.get('date', ''))[:10]}"


def _median_noise(lines: Sequence[Mapping[str, Any]]) -> float | None:
    noises = [float(x["noise"]) for x in lines if isinstance(x.get("noise"), (int, float))]
    return statistics.median(noises) if noises else None


def _p(pvalue: float) -> str:
    """The permutation test's p-value: none of its permutations beat the split reads
    p < 1/permutations, not 0."""
    if math.isnan(pvalue):
        return ""
    if pvalue < 1 / drift.PERMUTATIONS:
        return f", p<{1 / drift.PERMUTATIONS:g}"
    return f", p={pvalue:.2g}"


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def shift_text(key: SeriesKey, shift: drift.Shift) -> str:
    """ "decode_tok_s has fallen 7.8% in 6 runs since image X" (risen, for lower-is-better)."""
    _, server, concurrency, name, _ = key
    verb = "fallen" if shift.after < shift.before else "risen"
    return (
        f"{server} @ {concurrency}: {name} has {verb} {abs(shift.relative) * 100:.1f}% in {shift.runs} runs since "
        f"{since_what(shift.since)} ({_value(name, shift.before)} -> {_value(name, shift.after)}{_unit(name)}), "
        "each passing its gate"
    )


def select(
    history: History, servers: Sequence[str] = (), metrics: Sequence[str] = ()
) -> dict[SeriesKey, list[dict[str, Any]]]:
    """The history's series whose server and metric match the glob patterns (all when none)."""

    def matches(value: str, patterns: Sequence[str]) -> bool:
        return not patterns or any(fnmatch.fnmatchcase(value, p) for p in patterns)

    return {
        key: lines
        for key, lines in sorted(series(history.records).items())
        if matches(key[1], servers) and matches(key[3], metrics)
    }


def series_lines(
    key: SeriesKey,
    lines: Sequence[Mapping[str, Any]],
    *,
    pvalue: float = drift.PVALUE,
    min_change: float = drift.MIN_CHANGE,
    detect: bool = True,
) -> list[str]:
    """One series' block: header, sparkline with latest and range, change points, flag."""
    target, server, concurrency, name, workload = key
    everything = lines
    lines, dropped = drift.trusted(lines)
    values = [float(line["value"]) for line in lines]
    first, last = str(everything[0].get("date", ""))[:10], str(everything[-1].get("date", ""))[:10]
    out = [
        f"{server} @ {concurrency}  {name}  [{target}, workload {workload or '?'}]  "
        f"{len(everything)} run{'s' if len(everything) != 1 else ''} {first} .. {last}",
        f"  {sparkline(values)}  latest {_value(name, values[-1])}{_unit(name)}, range "
        f"{_value(name, min(values))} .. {_value(name, max(values))}"
        + (f" (last {SPARK_WIDTH} shown)" if len(values) > SPARK_WIDTH else ""),
    ]
    if dropped:
        runs = ", ".join(str(everything.index(line) + 1) for line in dropped)
        out.append(
            f"  left out: run{'s' if len(dropped) > 1 else ''} {runs} of {len(everything)}, noise over "
            f"{NOISY:g}x the median ({', '.join(_value(name, d.get('noise')) for d in dropped)} "
            f"against {_value(name, _median_noise(everything))}): a disturbed box, not a level"
        )
    if not detect:
        return out
    points = drift.change_points(values, pvalue=pvalue, min_change=min_change)
    if not points:
        few = f" (fewer than {drift.MIN_POINTS} runs)" if len(values) < drift.MIN_POINTS else ""
        out.append(f"  no change point{few}")
        return out

    def run_number(index: int) -> int:  # counted over every run shown, left-out ones included
        return everything.index(lines[index]) + 1

    for cp in points:
        line = lines[cp.index]
        out.append(
            f"  change at run {run_number(cp.index)}: {_value(name, cp.before)} -> {_value(name, cp.after)}"
            f"{_unit(name)} ({_percent(cp.relative)}{_p(cp.pvalue)}), from {describe_run(line)}"
        )
    shift = drift.latest_shift(lines, points)
    if shift is not None and shift.worse:
        if shift.passed:
            out.append(f"  FLAGGED: {shift_text(key, shift)}")
        else:
            out.append(
                f"  shift of {_percent(shift.relative)} since run {run_number(shift.start)}; its gate failed already"
            )
    return out


def history_text(
    history: History,
    *,
    servers: Sequence[str] = (),
    metrics: Sequence[str] = (),
    pvalue: float = drift.PVALUE,
    min_change: float = drift.MIN_CHANGE,
) -> str:
    """`llmperf history`'s output."""
    chosen = select(history, servers, metrics)
    where = ", ".join(str(p) for p in history.paths) or "no history file"
    lines = [f"history: {where}: {len(history.records)} lines, {len(chosen)} series"]
    detect = drift.detector_available()
    if not detect:
        lines.append(f"note: trends only, no change points: {drift.INSTALL_HINT}")
    lines += [f"skipped {problem}" for problem in history.skipped[:10]]
    if len(history.skipped) > 10:
        lines.append(f"skipped {len(history.skipped) - 10} more lines")
    for key, series_records in chosen.items():
        lines += ["", *series_lines(key, series_records, pvalue=pvalue, min_change=min_change, detect=detect)]
    if history.records and not chosen:
        lines.append("no series matches --server/--metric")
    return "\n".join(lines)


def drift_lines(history: History, scope: Iterable[tuple[str, int, str]] | None = None) -> list[str]:
    """One line per series in `scope` (None: all) with a sustained shift for the worse that
    every run passed; a note line when Otava is missing and there is history to check."""
    wanted = set(scope) if scope is not None else None
    chosen = {
        key: lines
        for key, lines in series(history.records).items()
        if wanted is None or (key[1], key[2], key[3]) in wanted
    }
    chosen = {key: lines for key, lines in chosen.items() if len(lines) >= drift.MIN_POINTS}
    if not chosen:
        return []
    if not drift.detector_available():
        return [f"drift check skipped: {drift.INSTALL_HINT}"]
    flagged = []
    for key, lines in sorted(chosen.items()):
        shift = drift.sustained_shift(lines)
        if shift is not None:
            flagged.append(f"  - {shift_text(key, shift)}")
    if not flagged:
        return []
    where = ", ".join(str(Path(p)) for p in history.paths)
    return [f"drift: sustained shifts that passed every gate (history {where}; llmperf history shows them):", *flagged]


def summary_drift_lines(
    document: Mapping[str, Any],
    rootdir: Path,
    option: str | None,
    shared: Callable[[], list[dict[str, Any]]] | None = None,
) -> list[str]:
    """The terminal summary's drift check of the series this session gated, from the history
    its gates appended to (`option`: --llmperf-history; None: beside each baseline; "off"),
    or from a shared store's (`shared`: its reader)."""
    from pytest_llmperf.baselines.history import HISTORY_FILE, OFF, HistoryError, read

    if option is not None and option.strip().lower() == OFF:
        return []
    gates = list(document.get("verdicts") or [])
    if option:
        paths = [Path(rootdir) / option]
    else:
        paths = sorted({Path(rootdir) / Path(str(g["baseline"])).parent / HISTORY_FILE for g in gates})
    scope = {(str(g["server"]), int(g["concurrency"]), str(v["metric"])) for g in gates for v in g.get("verdicts", [])}
    if not scope:
        return []
    try:
        return drift_lines(History(records=shared()) if shared is not None else read(paths), scope)
    except (HistoryError, RuntimeError) as exc:  # RuntimeError: the store (StoreError) could not be read
        return [f"drift check skipped: {exc}"]
