"""The standard error of a metric's change between two runs of the same prompts, paired
prompt by prompt: a seeded moving-block bootstrap (blocks of one wave) over both runs'
per-request rows. Run-wide noise (a restarted server) comes from repetitions instead
(stats/error.change_error).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import OverRequests, ScaledRatio, is_known, metric
from pytest_llmperf.metrics.summary import PERCENTILES
from pytest_llmperf.stats.bootstrap import RESAMPLES, SEED, block_count, block_indices, block_length

ROW_FIELDS = ("index", "prompt_tokens", "output_tokens", "chunks", "ttft_ms", "e2el_ms")

Row = tuple[int, int, int, int, float, float]


def request_rows(records: Iterable[RequestRecord], clock_speed: float = 1.0) -> list[Row]:
    """The successful requests' per-request figures, in dispatch order, in real-time ms."""
    rows: list[Row] = []
    for r in sorted((r for r in records if r.ok), key=lambda r: r.send_time):
        ttft, e2el = r.ttft, r.e2el
        if ttft is None or e2el is None:  # no chunk arrived
            continue
        rows.append(
            (
                int(r.index),
                int(r.prompt_tokens or 0),
                int(r.completion_tokens or 0),
                len(r.chunk_times),
                float(ttft) * 1000.0 * clock_speed,
                float(e2el) * 1000.0 * clock_speed,
            )
        )
    return rows


def encode_rows(rows: Sequence[Row]) -> list[str]:
    """One line of text per request, for a diffable baseline file."""
    return [f"{i} {p} {o} {c} {t:.6g} {e:.6g}" for i, p, o, c, t, e in rows]


def decode_rows(lines: Sequence[str]) -> list[Row]:
    """The inverse of encode_rows; ValueError names the bad line."""
    rows = []
    for n, line in enumerate(lines):
        parts = str(line).split()
        if len(parts) != len(ROW_FIELDS):
            raise ValueError(f"request row {n} {line!r}: expected {len(ROW_FIELDS)} fields ({' '.join(ROW_FIELDS)})")
        try:
            i, p, o, c = (int(x) for x in parts[:4])
            t, e = float(parts[4]), float(parts[5])
        except ValueError:
            raise ValueError(f"request row {n} {line!r}: expected four integers and two numbers") from None
        if min(i, p, o, c) < 0 or not (math.isfinite(t) and math.isfinite(e)) or t < 0 or e < t:
            raise ValueError(f"request row {n} {line!r}: negative count or impossible times")
        rows.append((i, p, o, c, t, e))
    return rows


def independent_blocks(baseline_rows: Sequence[Row], measured_rows: Sequence[Row], concurrency: int | None) -> int:
    """How many blocks the paired bootstrap resamples: its independent units."""
    base = {row[0] for row in baseline_rows}
    return block_count(sum(1 for row in measured_rows if row[0] in base), concurrency)


class _Side:
    """One run's rows of the common prompts, as columns, with its figures."""

    def __init__(
        self,
        rows: dict[int, Row],
        order: list[int],
        figures: Mapping[str, float | None],
        slos: Mapping[str, float] | None = None,
    ):
        table = np.array([rows[i] for i in order], dtype=float)
        self.col = {name: table[:, j] for j, name in enumerate(ROW_FIELDS)}
        out = self.col["output_tokens"]
        with np.errstate(all="ignore"):
            self.col["tpot_ms"] = np.where(out > 1, (self.col["e2el_ms"] - self.col["ttft_ms"]) / (out - 1), np.nan)
        chunks = self.col["chunks"]
        # Each decode step streams one chunk of 1 + accepted tokens.
        self.col["drafts"] = np.maximum(chunks - 1, 0)
        self.col["accepted"] = np.maximum(out - chunks, 0)
        if slos:
            # Each request met every SLO (metrics/goodput.py; TPOT 0 for one token or fewer).
            tpot = np.nan_to_num(self.col["tpot_ms"])
            value = {"ttft": self.col["ttft_ms"], "tpot": tpot, "e2el": self.col["e2el_ms"]}
            good = np.ones(len(order), dtype=bool)
            for name, ms in slos.items():
                good &= value[name] <= ms
            self.col["good"] = good.astype(float)
        self.figures = figures

    def statistic(self, name: str, idx: NDArray[Any]) -> NDArray[Any] | None:
        """`name` recomputed on every resample (rows of `idx`) by its registry row's
        estimator; None when it has none, or lacks the run's figure or a column."""
        estimator = metric(name).estimator if is_known(name) else None
        if isinstance(estimator, OverRequests):
            values = self.col[estimator.column][idx]
            resampled: NDArray[Any]
            with np.errstate(all="ignore"):
                if estimator.stat == "mean":
                    resampled = np.nanmean(values, axis=1)
                else:
                    resampled = row_percentiles(values, PERCENTILES[estimator.stat])
                if estimator.inverse is not None:
                    resampled = estimator.inverse / resampled
            return resampled
        figure = self.figures.get(name)
        if not isinstance(estimator, ScaledRatio) or figure is None:
            return None
        return self._ratio(figure, estimator, idx)

    def _ratio(self, figure: float, estimator: ScaledRatio, idx: NDArray[Any]) -> NDArray[Any] | None:
        """A ScaledRatio's resamples; None without one of its columns (`good`: without SLOs)."""
        col, count = self.col, len(self.col["index"])
        if any(c not in col for c in (*estimator.numerator, estimator.denominator or "index")):
            return None
        parts = estimator.numerator
        num = sum((col[p] for p in parts), np.zeros(count)) if parts else np.ones(count)
        den = col[estimator.denominator] if estimator.denominator else np.ones(count)
        if not estimator.offset:
            return self._scaled(figure, num, den, idx)
        scaled = self._scaled(figure - estimator.offset, num, den, idx)
        return None if scaled is None else estimator.offset + scaled

    @staticmethod
    def _scaled(figure: float, num: NDArray[Any], den: NDArray[Any], idx: NDArray[Any]) -> NDArray[Any] | None:
        if num.sum() <= 0 or den.sum() <= 0:
            return None
        d = den[idx].sum(axis=1)
        with np.errstate(all="ignore"):
            ratio: NDArray[Any] = (num[idx].sum(axis=1) / d) / (num.sum() / den.sum())
        return figure * ratio


def row_percentiles(values: NDArray[Any], q: float) -> NDArray[Any]:
    """np.nanpercentile(values, q, axis=1) (its linear method, NaN for a row of NaNs), for
    every row at once: numpy's own walks the rows one by one, slow over thousands of resamples."""
    ordered = np.sort(values, axis=1)  # NaNs last
    valid = np.count_nonzero(~np.isnan(values), axis=1)
    position = (np.maximum(valid, 1) - 1) * (q / 100.0)
    below = np.floor(position).astype(int)
    above = np.minimum(below + 1, np.maximum(valid - 1, 0))
    rows = np.arange(len(values))
    a, b = ordered[rows, below], ordered[rows, above]
    gamma = position - below
    with np.errstate(invalid="ignore"):
        out: NDArray[Any] = np.where(gamma >= 0.5, b - (b - a) * (1 - gamma), a + (b - a) * gamma)
    out[valid == 0] = np.nan
    return out


def paired_errors(
    baseline_rows: Sequence[Row],
    measured_rows: Sequence[Row],
    baseline_figures: Mapping[str, float | None],
    measured_figures: Mapping[str, float | None],
    names: Iterable[str],
    *,
    concurrency: int | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    slos: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Metric name -> standard error of (measured - baseline), for the names that have an
    estimator and at least two common prompts. `slos` (parsed, ms) enables goodput's.
    The error rests on `independent_blocks(...)` units (the rule's degrees of freedom)."""
    base = {row[0]: row for row in baseline_rows}
    order = [row[0] for row in measured_rows if row[0] in base]
    if len(order) < 2:
        return {}
    mine = {row[0]: row for row in measured_rows}
    b, m = _Side(base, order, baseline_figures, slos), _Side(mine, order, measured_figures, slos)
    idx = block_indices(len(order), block_length(len(order), concurrency), resamples, np.random.default_rng(seed))
    out: dict[str, float] = {}
    for name in names:
        sb, sm = b.statistic(name, idx), m.statistic(name, idx)
        if sb is None or sm is None:
            continue
        diff = sm - sb
        diff = diff[np.isfinite(diff)]
        if len(diff) >= 2:
            out[name] = float(np.std(diff, ddof=1))
    return out
