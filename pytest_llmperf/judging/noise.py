"""The noise of each gated metric's change against a reference entry, combined by
stats.error.change_error (docs/verdicts.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.goodput import parse_slos
from pytest_llmperf.metrics.registry import CAPACITY, CAPACITY_BROKEN_AT, GATED_DECODE, SPEEDUP
from pytest_llmperf.metrics.uncertainty import decode_rows, independent_blocks, paired_errors
from pytest_llmperf.stats.error import Noise, change_error, ratio_error, with_nightly
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.stats.spread import Spread

OLD_ENTRY_NOTE = (
    "the baseline has no per-request figures (recorded by an older version): judged on the "
    "tolerance alone; re-record it to judge against the request-level noise"
)


def change_noise(
    run: MeasuredRun,
    entry: BaselineEntry | None,
    samples: Samples,
    pools: Mapping[str, Spread],
    base: MeasuredRun | None = None,
    base_entry: BaselineEntry | None = None,
    nightly: Mapping[str, Spread] | None = None,
) -> dict[str, Any]:
    """compare_metrics' `errors` and `notes`; nothing without an entry. With `base` (a
    speedup), each server's decode change against its own entry. `nightly`: each metric's
    spread between the sessions before (the history's), which tonight's side is at least."""
    if not entry:
        return {}
    if base is None:
        paired, blocks = request_errors(run, entry, list(samples))
    else:
        paired, blocks = speedup_errors(run, entry, samples, base, base_entry)
    errors: dict[str, Noise | None] = {}
    notes: dict[str, str] = {}
    for name, values in samples.items():
        if name == CAPACITY:
            errors[name] = capacity_error(run, entry)
        else:
            errors[name] = change_error(
                paired.get(name),
                entry.samples(name),
                values,
                paired_dof=max(blocks - 1, 1),
                pool=pools.get(name),
            )
        between = (nightly or {}).get(name)
        widened = with_nightly(errors[name], between)
        if between is not None and widened is not errors[name]:
            errors[name] = widened
            notes[name] = f"tonight's side: the spread of the last {between.dof + 1} sessions' values"
        if entry.requests is None and errors[name] is None:
            # with a spread between repetitions known, the request lines would not be read
            notes[name] = OLD_ENTRY_NOTE
    return {"errors": errors, "notes": notes}


def request_errors(run: MeasuredRun, entry: BaselineEntry | None, names: list[str]) -> tuple[dict[str, float], int]:
    """The paired request-level errors of `names` against the entry, and the independent
    blocks they rest on; nothing without the entry's request lines."""
    if not entry or entry.requests is None or not run.rows:
        return {}, 0
    rows = decode_rows(entry.requests)
    figures = entry.figures
    slos = parse_slos(run.workload.slos) if run.workload.slos else None  # the entry's too: same workload
    errors = paired_errors(rows, run.rows, figures, run.figures, names, concurrency=run.concurrency, slos=slos)
    return errors, independent_blocks(rows, run.rows, run.concurrency)


def speedup_errors(
    run: MeasuredRun, entry: BaselineEntry, samples: Samples, base: MeasuredRun, base_entry: BaselineEntry | None
) -> tuple[dict[str, float], int]:
    """The speedup's paired error, each server's decode error propagated through the ratio
    (relative errors add in quadrature); and the fewer independent blocks of the two."""
    mine, blocks = request_errors(run, entry, [GATED_DECODE])
    theirs, base_blocks = request_errors(base, base_entry, [GATED_DECODE])
    speedup = median_of(samples.get(SPEEDUP, []))
    ours, their = run.value(GATED_DECODE), base.value(GATED_DECODE)
    paired = {}
    if speedup and ours and their and GATED_DECODE in mine and GATED_DECODE in theirs:
        paired[SPEEDUP] = ratio_error(speedup, (mine[GATED_DECODE], ours), (theirs[GATED_DECODE], their))
    return paired, min(blocks, base_blocks)


UNIFORM_SD = 1 / math.sqrt(12)  # a value anywhere in an interval, evenly: its standard deviation per width


def capacity_error(run: MeasuredRun, entry: BaselineEntry) -> Noise | None:
    """A capacity's change error: each side's capacity lies somewhere in its interval (from
    the capacity up to the load decided broken above it: the search's resolution), evenly as
    far as the search can tell, so each side adds width / sqrt(12); their repetitions' spread
    where both made more than one search. None where a side has no interval (none decided
    broken): judged on the tolerance alone."""
    widths = [_width(run.samples.get(CAPACITY, []), run.samples.get(CAPACITY_BROKEN_AT, []))]
    widths.append(_width(entry.samples(CAPACITY), entry.samples(CAPACITY_BROKEN_AT)))
    if any(w is None for w in widths):
        return None
    sigma = math.sqrt(sum((w or 0.0) ** 2 for w in widths)) * UNIFORM_SD
    spread = change_error(None, entry.samples(CAPACITY), run.samples.get(CAPACITY, []))
    if spread is not None and spread.sigma > sigma:
        return spread
    return Noise(sigma)


def _width(lows: list[float | None], highs: list[float | None]) -> float | None:
    low, high = median_of(lows), median_of(highs)
    return None if low is None or high is None else max(high - low, 0.0)
