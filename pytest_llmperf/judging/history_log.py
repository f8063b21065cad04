"""The history lines a session appends for its judged and recorded runs
(baselines/history.py keeps the format): where they go, and one line per metric."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.history import OFF as HISTORY_OFF
from pytest_llmperf.baselines.history import HistoryError
from pytest_llmperf.baselines.history import append as append_history
from pytest_llmperf.baselines.history import default_path as history_default_path
from pytest_llmperf.baselines.history import make_record as history_record
from pytest_llmperf.baselines.history import read as read_history
from pytest_llmperf.baselines.history import series as history_series
from pytest_llmperf.baselines.history import workload_hash as history_workload_hash
from pytest_llmperf.judging.reference import Identity
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.stats.spread import Spread, nightly_spread

# (metric, value, outcome, noise, baseline, the confidence the noise is at)
Judged = tuple[str, float | None, str, float | None, float | None, float | None]
# A shared store's history lines of one baseline folder, as history.jsonl holds them.
SharedLines = Callable[[str], list[dict[str, Any]]]
NOT_NOISE = frozenset({"regressed", "suspect"})  # outcomes left out of a cell's nightly spread


class HistoryLog:
    """History lines beside the baselines (or at --llmperf-history; none when off), queued
    during the session and appended by `flush()` at its end; with a shared store
    (`shared`: its reader), queued in `store_lines`, which the session's end writes to it."""

    def __init__(
        self,
        options: LlmperfOptions,
        baselines_root: Path,
        rootdir: Path,
        identity: Identity,
        shared: SharedLines | None = None,
    ) -> None:
        self.options = options
        self.baselines_root = baselines_root
        self.rootdir = rootdir
        self.identity = identity
        self.shared = shared
        self.pending: dict[Path, list[dict[str, Any]]] = {}  # each history file's lines, appended by flush()
        self.store_lines: list[dict[str, Any]] = []  # the shared store's lines, written at the session's end
        # The lines by series as found, of each history file, or of each baseline folder in the shared store.
        self.before: dict[Path | str, dict[Any, list[dict[str, Any]]]] = {}

    @property
    def off(self) -> bool:
        """--llmperf-history off: no history is read or kept."""
        chosen = self.options.history
        return chosen is not None and chosen.strip().lower() == HISTORY_OFF

    def path(self, folder: str) -> Path | None:
        """The history file runs judged in baseline folder `folder` append to:
        --llmperf-history, else beside the baselines; None when off or kept in a shared store."""
        if self.off or self.shared is not None:
            return None
        chosen = self.options.history
        return self.rootdir / chosen if chosen else history_default_path(self.baselines_root, folder)

    def for_store(self) -> list[dict[str, Any]]:
        """The lines queued for a shared store (the report document's `history`)."""
        return list(self.store_lines)

    def append(self, run: MeasuredRun, folder: str, judged: Sequence[Judged]) -> None:
        """Queue one line per judged metric with a value."""
        if self.off:
            return
        reps = max((len(v) for v in run.samples.values()), default=0) or None
        key = history_workload_hash(self.identity(run))
        lines = [
            line
            for name, value, outcome, noise, baseline, confidence in judged
            if (
                line := history_record(
                    server=run.server.name,
                    concurrency=run.concurrency,
                    metric=name,
                    value=value,
                    outcome=str(outcome),
                    target=folder,  # the history line's field: the baseline folder
                    provenance=run.provenance,
                    workload=key,
                    noise=noise,
                    confidence=confidence,
                    baseline=baseline,
                    reps=reps,
                )
            )
        ]
        path = self.path(folder)
        if path is None:
            self.store_lines.extend(lines)
        else:
            self.pending.setdefault(path, []).extend(lines)

    def earlier_outcomes(self, run: MeasuredRun, folder: str, metric: str, count: int) -> list[str]:
        """The outcomes of the last `count` sessions (at most) that judged or recorded this
        run's server, concurrency, workload and `metric` in `folder`, oldest first, as the
        history was before this session (its own lines are queued until flush)."""
        if count <= 0:
            return []
        return [str(line["outcome"]) for line in self.earlier_lines(run, folder, metric)[-count:]]

    def nightly_spread(self, run: MeasuredRun, folder: str, metric: str) -> Spread | None:
        """The spread of this cell's value between the sessions before (stats.spread.nightly_spread)
        over its lines that read no regression (a change under way is not noise); None with
        too few."""
        values = [
            float(line["value"])
            for line in self.earlier_lines(run, folder, metric)
            if str(line["outcome"]) not in NOT_NOISE
        ]
        return nightly_spread(values)

    def nightly_spreads(self, run: MeasuredRun, folder: str, names: list[str]) -> dict[str, Spread]:
        """Each of `names`' spread between the sessions before (those with one)."""
        spreads = {name: self.nightly_spread(run, folder, name) for name in names}
        return {name: spread for name, spread in spreads.items() if spread is not None}

    def earlier_lines(self, run: MeasuredRun, folder: str, metric: str) -> list[dict[str, Any]]:
        """This cell's lines in `folder` (server, concurrency, workload, `metric`), oldest
        first, as the history was before this session; none when the history is off or unreadable."""
        if self.off:
            return []
        path = self.path(folder)
        where = folder if path is None else path
        if where not in self.before:
            try:
                records = self.shared(folder) if self.shared is not None else read_history([where]).records
            except (HistoryError, RuntimeError):
                records = []  # an unreadable history confirms nothing: the regression stays suspect
            self.before[where] = history_series(records)
        key = (folder, run.server.name, run.concurrency, metric, history_workload_hash(self.identity(run)))
        return self.before[where].get(key, [])

    def flush(self) -> tuple[int, list[str]]:
        """Append the queued history files' lines (a shared store's stay for the session's
        end); how many were written and, for a history that could not be, why (a history
        not written does not change a verdict)."""
        written = 0
        problems: list[str] = []
        pending, self.pending = self.pending, {}
        for path, lines in pending.items():
            try:
                append_history(path, lines)
                written += len(lines)
            except OSError as exc:
                problems.append(f"history {path}: not written: {exc}")
        return written, problems
