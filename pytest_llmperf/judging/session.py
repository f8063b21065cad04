"""PerfSession: one pytest session's servers, runs and verdicts.

It wires the rooms together: a PromptBook (datasets and prompts), a Measurer (runs,
repetitions, warm-ups, fresh starts) under a repetition policy, and a Gate judging each
run against a Reference: the stored baselines, or in a paired session (paired.py) OLD's
runs. plugin.py creates one and hands it to fixtures; tests inject a fake runner, prompt
sampler or verdict rule through the constructor.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.compare import compare_metrics
from pytest_llmperf.baselines.judgement import GateRecord
from pytest_llmperf.baselines.outcome import HistoryWarning
from pytest_llmperf.baselines.store import BaselineStore
from pytest_llmperf.judging.assertions import Assertions
from pytest_llmperf.judging.gate import Gate, Repeater, Rule
from pytest_llmperf.judging.history_log import SharedLines
from pytest_llmperf.judging.more_runs import MoreRuns
from pytest_llmperf.judging.paired import PairedBlocks, PairedReference
from pytest_llmperf.judging.reference import Reference, StoredBaseline, published_figures
from pytest_llmperf.judging.unused import Asked, unused_lines
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.measurer import HttpRunner, Measurer, Repetitions, Runner
from pytest_llmperf.measuring.prompt_book import PromptBook, Sampler
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.base import ServerTarget
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.pool import ServerPool
from pytest_llmperf.servers.readiness import why_down
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import Workload


class PerfSession:
    """The session's measuring and judging: `run` measures (once per server and
    workload), `bind` hands a run to one test's assertions, `gates` keeps their outcomes."""

    def __init__(
        self,
        options: LlmperfOptions,
        target: ServerTarget,
        rootdir: Path,
        *,
        ini_tolerances: Mapping[str, Tolerance] | None = None,
        datasets: Mapping[tuple[str, str | None], Any] | None = None,
        log: Callable[[str], None] = lambda msg: None,
        detail: Callable[[str], None] | None = None,
        live_output: Callable[[], AbstractContextManager[Any]] = nullcontext,
        runner: Runner | None = None,
        prompts: Sampler | None = None,
        rule: Rule = compare_metrics,
        server_down: Callable[[Endpoint], str | None] = why_down,
        clock: Callable[[], float] = time.perf_counter,
        shared_history: SharedLines | None = None,
        repeater: Callable[[Measurer], Repeater] = MoreRuns,
    ) -> None:
        self.options = options
        self.target = target
        self.rootdir = Path(rootdir)
        self.pool = ServerPool(target, log=log)
        self.store = BaselineStore(self.rootdir / options.baselines_dir, deferred=True)  # written by finish()
        self.book = PromptBook(options, self.rootdir, datasets, log=log)
        # A paired session (--llmperf-against-image/--llmperf-against-sim-args): blocks of OLD and NEW.
        self.paired = PairedBlocks(options) if options.paired else None
        self.measurer = Measurer(
            options,
            self.pool,
            published_figures(self.store),
            self.book,
            self.rootdir,
            policy=self.paired or Repetitions(options),
            runner=runner or HttpRunner(log, live_output),
            prompts=prompts,
            server_down=server_down,
            clock=clock,
            log=log,
            detail=detail,
        )
        reference: Reference = (
            PairedReference(options, self.paired, self.measurer.runs, self.store, self.book.workload_identity)
            if self.paired
            else StoredBaseline(options, self.store, self.book.workload_identity)
        )
        self.gate = Gate(
            options,
            self.store,
            self.rootdir,
            reference,
            repeater(self.measurer),  # whether a verdict wants another run (a benchmark's design: its own)
            self.book.workload_identity,
            kind_name=target.name,
            ini_tolerances=options.ini_tolerances if ini_tolerances is None else ini_tolerances,
            rule=rule,
            shared_history=shared_history,
        )
        self.assertions = Assertions(self.gate, options)
        self.capacities: list[dict[str, Any]] = []  # each capacity search's line (llmperf.capacity), for the report

    @property
    def runs(self) -> dict[tuple[ServerSpec, Workload], MeasuredRun]:
        return self.measurer.runs

    @property
    def gates(self) -> list[GateRecord]:
        return self.assertions.records

    @property
    def run_count(self) -> int:
        return self.measurer.run_count

    @property
    def added_seconds(self) -> float:
        return self.measurer.added_seconds

    def is_cached(self, spec: ServerSpec, workload: Workload) -> bool:
        return self.measurer.is_cached(spec, workload)

    def run(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """Measure `spec` under `workload`, once per session (later calls reuse it)."""
        return self.measurer.run(spec, workload)

    def bind(
        self,
        run: MeasuredRun,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget | str | None = None,
    ) -> MeasuredRun:
        """`run` as test `nodeid` sees it: its assertions judged by the session's gate."""
        return self.assertions.bind(run, nodeid, marker_tolerances, error_budget)

    @property
    def history_for_store(self) -> list[dict[str, Any]]:
        """The history lines queued for a shared store (--llmperf-store)."""
        return self.gate.history.for_store()

    @property
    def baselines_written(self) -> list[str]:
        """The baseline files finish() wrote, from the rootdir (absolute when outside it)."""
        out = []
        for path in self.store.written:
            try:
                out.append(str(path.resolve().relative_to(self.rootdir.resolve())))
            except ValueError:
                out.append(str(path))
        return out

    def workload_identity(self, run: MeasuredRun) -> dict[str, Any]:
        return self.book.workload_identity(run)

    def paired_info(self) -> dict[str, Any] | None:
        """For the report document: what a paired session paired, its start order and
        OLD's runs; None for a session judged against stored baselines."""
        if self.paired is None:
            return None
        return {**self.paired.info(), "against": list(self.paired.against.values())}

    def finish(self, asked: Asked | None = None, *, interrupted: bool = False) -> SessionEnd:
        """Write the baseline records and history lines queued during the session (an
        interrupted one writes what completed), then list the baseline entries no test in
        `asked` (the collected tests) or run asks for, removing them under --llmperf-prune."""
        records = self.store.pending_entries()
        files, problems = self.store.flush()
        lines_written, history_problems = self.gate.history.flush()
        lines = []
        if interrupted and (records or lines_written):
            lines.append(
                f"interrupted: wrote what completed: {records} baseline record(s) in {len(files)} file(s), "
                f"{lines_written} history line(s)"
            )
        elif files:
            lines.append(f"baselines written: {records} record(s) in {len(files)} file(s)")
        lines += [f"NOT WRITTEN: {problem}" for problem in problems]
        lines += young_lines(self.gate.young, self.options.baseline_nights)
        for problem in history_problems:  # a history not written leaves the verdicts as they are
            warnings.warn(HistoryWarning(problem), stacklevel=2)
        if self.paired is None and asked is not None:
            if interrupted:
                lines += (
                    ["unused baseline entries not looked for: the session was interrupted"]
                    if self.options.prune
                    else []
                )
            else:
                wanted = {k: (None if v is None else {*v, *self.gate.used.get(k, ())}) for k, v in asked.items()}
                wanted.update({k: v for k, v in self.gate.used.items() if k not in asked})
                lines += unused_lines(
                    self.store, self.gate.folders, wanted, prune=self.options.prune, root=self.options.baselines_dir
                )
        return SessionEnd(lines, failed=bool(problems))

    def close(self) -> None:
        self.pool.stop()


def young_lines(young: Mapping[tuple[str, int], int], due: int) -> list[str]:
    """The summary's line on the entries judged against a level of fewer recording nights than `due`."""
    if not young:
        return []
    fewest = min(young.values())
    entries = "1 entry rests" if len(young) == 1 else f"{len(young)} entries rest"
    nights = "one recording night" if fewest == 1 else f"{fewest} recording nights"
    more = due - fewest
    cells = [f"{server} @ {concurrency}" for server, concurrency in sorted(young)]
    shown = ", ".join(cells[:SHOWN_CELLS]) + (
        f" and {len(cells) - SHOWN_CELLS} more" if len(cells) > SHOWN_CELLS else ""
    )
    return [
        f"baselines: {entries} on {nights} of {due}, whose shift of the box is in every verdict: "
        f"record {more} more night{'s' if more > 1 else ''} of this build with --update-baselines ({shown})"
    ]


SHOWN_CELLS = 4  # the young entries the summary's line names


@dataclass(frozen=True)
class SessionEnd:
    """What the end of a session wrote and found: lines for the summary; `failed` when a
    baseline record could not be written."""

    lines: list[str]
    failed: bool = False
