"""Judging: a measured run's gated metrics against a Reference (the stored baselines, OLD's
runs in a paired session, a saved run for `llmperf compare`), or recorded as baselines
under --update-baselines. The gate returns a Judgement (outcome.py): report/judgement.py
puts it in words, and the session's assertions fail or warn as it says (assertions.py).

The verdict rule itself (baselines/compare.compare_metrics) is injected as `rule`; a
run's validity is the reference's (validity.py); the noise of each change comes from the
paired request-level errors, the repetitions on both sides and the spread pooled over the
other cells (docs/verdicts.md)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_llmperf.baselines.compare import (
    Status,
    Verdict,
    compare_metrics,
    confirmed,
)
from pytest_llmperf.baselines.crosscheck import OutputChange, compare_outputs, output_change_reason
from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.judgement import Judgement
from pytest_llmperf.baselines.outcome import Outcome
from pytest_llmperf.baselines.store import BaselineStore, sanitize_name, workload_key
from pytest_llmperf.baselines.tolerances import Tolerances
from pytest_llmperf.judging.history_log import HistoryLog, SharedLines
from pytest_llmperf.judging.noise import change_noise
from pytest_llmperf.judging.read_again import flagged_metrics, fresh_samples, read_again, with_look
from pytest_llmperf.judging.reference import Found, Identity, Reference, Refused, default_baseline_folder
from pytest_llmperf.measuring.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.crosscheck import encode_outputs, output_rows
from pytest_llmperf.metrics.failures import ErrorBudget, failures, faults_note, stalls
from pytest_llmperf.metrics.registry import COMPLETED, Tolerance
from pytest_llmperf.metrics.uncertainty import encode_rows
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.util.files import relative_to

NO_FAILURES = ErrorBudget(0.0)
STALLED = "no request completed, its server alive: made again on a fresh start"
Rule = Callable[..., list[Verdict]]  # compare_metrics' signature: the verdicts of the gated metrics


class Repeater(Protocol):
    """What the gate asks for more runs: more_runs.MoreRuns over the Measurer."""

    def worth_another(
        self, run: MeasuredRun, verdicts: Sequence[Verdict], read_before: Collection[str] = ()
    ) -> str | None: ...

    def extend(
        self, measured: MeasuredRun, why: str = "inconclusive", *, stalled: bool = False, confirming: bool = False
    ) -> bool: ...


class NoMoreRuns:
    """A Repeater for runs that cannot be made again (a saved result)."""

    def worth_another(
        self, run: MeasuredRun, verdicts: Sequence[Verdict], read_before: Collection[str] = ()
    ) -> str | None:
        return None

    def extend(
        self, measured: MeasuredRun, why: str = "inconclusive", *, stalled: bool = False, confirming: bool = False
    ) -> bool:
        return False


@dataclass(frozen=True)
class Looked:
    """The last look of auto repetitions: its verdicts, the entry, why the run cannot be
    judged (outputs included), the outputs' change and whether they were checked."""

    verdicts: list[Verdict]
    entry: BaselineEntry | None
    invalid: str | None
    outputs: OutputChange | None
    checked: bool


class Gate:
    """Each assertion judged (or recorded) against the reference, as a Judgement."""

    def __init__(
        self,
        options: LlmperfOptions,
        store: BaselineStore,
        rootdir: Path,
        reference: Reference,
        repeater: Repeater,
        identity: Identity,
        *,
        kind_name: str,
        ini_tolerances: Mapping[str, Tolerance] | None = None,
        rule: Rule = compare_metrics,
        shared_history: SharedLines | None = None,
    ) -> None:
        self.options = options
        self.store = store
        self.rootdir = rootdir
        self.reference = reference
        self.repeater = repeater
        self.identity = identity
        self.kind_name = kind_name  # the target kind's name: the baseline folder where no GPU model names one
        self.ini_tolerances = dict(ini_tolerances or {})  # llmperf_tolerances, parsed by the plugin
        self.rule = rule
        self.history = HistoryLog(options, store.root, rootdir, identity, shared_history)
        self.folders: set[str] = set()  # the baseline folders judged or recorded in
        self.used: dict[str, set[tuple[int, str]]] = {}  # server file -> entries read or written
        # This session's id in a recorded metric's nights: its date, and a part that tells two sessions apart.
        self.session = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%dT%H:%M}Z-{uuid.uuid4().hex[:6]}"
        self.young: dict[tuple[str, int], int] = {}  # (server, concurrency) -> recording nights, where fewer than due

    def baseline_folder(self, run: MeasuredRun) -> str:
        """The folder of baselines/ this run is judged in: --llmperf-target-name, else per GPU
        model, else the target kind."""
        return self.options.target_name or default_baseline_folder(self.kind_name, run.provenance)

    def judge(
        self,
        run: MeasuredRun,
        collect: Callable[[], Samples],
        tolerances: Mapping[str, str] | None = None,
        base: MeasuredRun | None = None,
        *,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget = NO_FAILURES,
    ) -> Judgement:
        """Judge (or record) for test `nodeid` the gated metrics' samples that `collect()`
        returns; auto repetitions call it again after each added run. `tolerances` (the
        assertion's) take precedence over `marker_tolerances` (the test's marker). A run
        beyond its error budget is invalid: never recorded, never passed."""
        samples = collect()
        folder = self.baseline_folder(run)
        self.folders.add(folder)
        for used in (run, base) if base is not None else (run,):
            key = workload_key(self.identity(used))
            self.used.setdefault(sanitize_name(used.server.name), set()).add((used.concurrency, key))
        path = relative_to(self.store.path_for(folder, run.server.name), self.rootdir)
        invalid = self.reference.invalid(run, base, error_budget)
        if self.options.update_baselines:
            return self._record(nodeid, path, run, samples, base, folder, invalid)
        where = self.reference.where(run, path)
        command = self.reference.update_command(nodeid)
        found = self.reference.entry(run, base, folder)
        if isinstance(found, Refused):
            message = found.message(where, run.concurrency, command)
            return Judgement(nodeid, run.server.name, run.concurrency, where, Outcome.REFUSED, message)
        if (
            self.reference.recorded
            and found is not None
            and (nights := entry_nights(found, list(samples))) < self.options.baseline_nights
        ):
            self.young[(run.server.name, run.concurrency)] = nights
        layers = Tolerances(tolerances, marker_tolerances, self.ini_tolerances)  # each parsed once, at its first look
        looked = self._verdicts_until_decided(run, collect, layers, base, folder, found, invalid, error_budget, command)
        fresh = self.reference.reads_again(base) if self.options.repetitions == "auto" else None
        earlier: Callable[[str, int], list[str]]
        if self.reference.keeps_history:
            needed, earlier = self.options.confirm - 1, functools.partial(self.history.earlier_outcomes, run, folder)
        else:  # no sessions before: where a flagged cell is read again, that look confirms it
            needed, earlier = int(fresh is not None), no_sessions
        verdicts = confirmed(looked.verdicts, needed, earlier)
        notes: tuple[str, ...] = ()
        if fresh is not None and (flagged := flagged_metrics(verdicts, needed)):

            def judge_fresh(made: int) -> list[Verdict]:
                entry = self.reference.again(run, base, folder, made, looked.entry)
                samples = fresh_samples(run, base, list(collect()), made)
                return self._verdicts(run, entry, samples, layers, command, base, folder, None)

            again, note = read_again(self.repeater.extend, [r for r in (run, base) if r], flagged, judge_fresh, fresh)
            if again or self.reference.keeps_history:  # the next session may still confirm it
                verdicts = confirmed(looked.verdicts, needed, with_look(earlier, again))
            else:  # nothing read again and no session after it: judged on its one look
                verdicts = looked.verdicts
            notes = (note,)
        if self.reference.keeps_history:
            judged = [(v.metric, v.measured, v.status, v.noise, v.baseline, v.confidence) for v in verdicts]
            self.history.append(run, folder, judged)
        return self._conclude(nodeid, where, folder, run, base, verdicts, looked, error_budget, notes)

    def _record(
        self,
        nodeid: str,
        path: str,
        run: MeasuredRun,
        samples: Samples,
        base: MeasuredRun | None,
        folder: str,
        invalid: str | None,
    ) -> Judgement:
        """--update-baselines: the run's figures (a speedup: itself) become the baseline entry."""
        judgement = Judgement(nodeid, run.server.name, run.concurrency, path, Outcome.RECORDED)
        where = f"{run.server.name} @ concurrency {run.concurrency}"
        if invalid:
            return _replace(judgement, Outcome.FAIL, f"{where}: not recorded: invalid run: {invalid}")
        missing = [name for name, values in samples.items() if all(v is None for v in values)]
        provenance = dict(run.provenance)
        if base is not None:
            provenance["speedup_base"] = {
                "server": base.server.name,
                "vllm_version": base.provenance.get("vllm_version"),
            }
        # A run's own figures are all recorded, so later assertions on any of them find a
        # baseline; a speedup adds only itself.
        metrics = dict(samples) if base is not None else {**run.samples, **samples}
        self.store.record(
            folder,
            run.server.name,
            run.concurrency,
            metrics,
            self.identity(run),
            provenance,
            requests=encode_rows(run.rows) if base is None else None,
            outputs=encode_outputs(output_rows(run.results[0].records)) if base is None and run.results else None,
            session=self.session,
            nights=self.options.baseline_nights,
        )
        self.history.append(run, folder, [(n, median_of(samples[n]), "recorded", None, None, None) for n in samples])
        recorded = [name for name in samples if name not in missing]
        message = f"recorded {', '.join(recorded) or 'nothing'} in {path}"
        if recorded and self.options.baseline_nights > 1:
            stored = self.store.load(folder, run.server.name)
            entry = stored.entry(run.concurrency, self.identity(run)) if stored else None
            nights = entry_nights(BaselineEntry.from_dict(entry), recorded) if entry else 1
            message += f" (recording night {nights} of {self.options.baseline_nights})"
        if missing:
            reasons = "; ".join(f"{name}: {no_data_reason(run, name)}" for name in missing)
            return _replace(judgement, Outcome.FAIL, f"{message}; not recorded, no data: {reasons}")
        return _replace(judgement, Outcome.RECORDED, message)

    def _verdicts_until_decided(
        self,
        run: MeasuredRun,
        collect: Callable[[], Samples],
        tolerances: Tolerances,
        base: MeasuredRun | None,
        folder: str,
        found: BaselineEntry | None,
        invalid: str | None,
        error_budget: ErrorBudget,
        command: str,
    ) -> Looked:
        """The verdicts, with runs added by auto repetitions while they ask for more; the
        entry judged against (asked of the reference again at each look), why the run is
        invalid (outputs included), and the outputs' change."""
        entry = found
        invalid, outputs = check_outputs(run, entry, invalid)
        looks = 0
        read_before: list[str] = []  # the metrics the look before read `regressed`
        while True:
            if looks:
                entry = _entry_of(self.reference.entry(run, base, folder), entry)
            verdicts = self._verdicts(run, entry, collect(), tolerances, command, base, folder, invalid)
            looks += 1
            looked = Looked(verdicts, entry, invalid, outputs, entry is not None and bool(run.results))
            if invalid:
                # A run that completed nothing while its server lives: once more on a fresh start
                # (the repeater says whether this one is such a run: Measurer.can_retry).
                if looks > 1 or not self.repeater.extend(run, STALLED, stalled=True):
                    return looked
                invalid, outputs = check_outputs(run, entry, self.reference.invalid(run, base, error_budget))
                continue
            why = self.repeater.worth_another(run, verdicts, read_before=read_before)
            if why is None or not self.repeater.extend(run, why):
                return looked
            if base is not None:  # a speedup's repetition is a pair: its base re-run too, each ratio its own pair's
                self.repeater.extend(base, why)
            read_before = [v.metric for v in verdicts if v.status == Status.REGRESSED]

    def _conclude(
        self,
        nodeid: str,
        where: str,
        folder: str,
        run: MeasuredRun,
        base: MeasuredRun | None,
        verdicts: list[Verdict],
        looked: Looked,
        error_budget: ErrorBudget,
        notes: tuple[str, ...] = (),
    ) -> Judgement:
        """The judgement of the verdicts (`notes` under its table): failing (a verdict, or the
        output canary), warning (suspect, or undecided under --llmperf-inconclusive warn) or passing."""
        runs = [*run.results, *(base.results if base is not None else [])]
        faults = faults_note(
            (failures(r.records, r.attempted) for r in runs),
            (stalls(r.records, r.clock_speed) for r in runs),
            error_budget,
        )
        policy = self.options.inconclusive
        failing = [
            v
            for v in verdicts
            if not v.ok and v.status != Status.SUSPECT and (v.status != Status.INCONCLUSIVE or policy == "fail")
        ]
        invalid, outputs = looked.invalid, looked.outputs
        canary = not invalid and outputs is not None and outputs.changed_beyond(self.options.changed_outputs)
        undecided = any(v.status == Status.INCONCLUSIVE for v in verdicts)
        spent = [note for note in run.notes if note.startswith("auto repetitions stopped")]
        if failing or canary:
            outcome = Outcome.FAIL
        elif any(v.status == Status.SUSPECT for v in verdicts) or (undecided and policy == "warn"):
            outcome = Outcome.WARN
        else:
            outcome = Outcome.PASS
        return Judgement(
            nodeid,
            run.server.name,
            run.concurrency,
            where,
            outcome,
            verdicts=tuple(verdicts),
            title=self.reference.title(run, where, folder),
            failing=tuple(failing),
            entry=looked.entry,
            invalid=invalid,
            faults=None if invalid else faults,
            outputs=outputs,
            checked=looked.checked,
            canary=canary,
            notes=(*notes, *((spent[0],) if undecided and spent else ())),
            explain=bool(failing) or any(v.status == Status.IMPROVED for v in verdicts),
            speculative=run.server.is_speculative and not invalid,
            provenance=dict(run.provenance),
            figures=run.figures,
        )

    def _verdicts(
        self,
        run: MeasuredRun,
        entry: BaselineEntry | None,
        samples: Samples,
        tolerances: Tolerances,
        command: str,
        base: MeasuredRun | None,
        folder: str,
        invalid: str | None,
    ) -> list[Verdict]:
        measured = {name: median_of(values) for name, values in samples.items()}
        no_data = {name: no_data_reason(run, name) for name in samples if measured.get(name) is None}
        # The spread between the sessions before, where the reference keeps a history (a paired session's does not).
        keeps = entry and self.reference.keeps_history
        nightly = self.history.nightly_spreads(run, folder, list(samples)) if keeps else None
        # The fewest requests a run on either side completed: statistics over requests from
        # fewer than the registry's min_requests are not judged.
        counts: list[float] = [r.completed for r in run.results]
        if entry:
            counts += [c for c in entry.samples(COMPLETED) if c is not None]
        base_entry = _entry_of(self.reference.entry(base, None, folder), None) if entry and base is not None else None
        return self.rule(
            list(samples),
            entry.metrics if entry else None,
            measured,
            overrides=tolerances,
            update_command=command,
            no_data_reasons=no_data,
            confidence=self.options.alarm_confidence,
            pass_confidence=self.options.confidence,
            invalid=invalid,
            requests=int(min(counts)) if counts else None,
            **change_noise(
                run,
                entry,
                samples,
                self.reference.spread_pools(folder, run, list(samples)) if entry else {},
                base,
                base_entry,
                nightly,
            ),
        )


def check_outputs(
    run: MeasuredRun, entry: BaselineEntry | None, invalid: str | None
) -> tuple[str | None, OutputChange | None]:
    """The run's outputs against the entry's (baselines/crosscheck.py): why the run is
    invalid (`invalid` as given, else output lengths or the EOS share moved beyond their
    bounds) and the change."""
    if entry is None or not run.results:
        return invalid, None
    first = next((r for r in run.results if r.completed), run.results[0])  # a stalled start's made again
    change = compare_outputs(entry.as_dict(), run.rows, output_rows(first.records))
    return invalid or output_change_reason(change), change


def no_sessions(metric: str, count: int) -> list[str]:
    """The outcomes of the sessions before, where a reference keeps none."""
    return []


def entry_nights(entry: BaselineEntry, names: Sequence[str]) -> int:
    """The fewest recording nights the level of `names` rests on in `entry` (an entry
    recorded before nights were kept: one)."""
    counts = [len(entry.metrics[name].get("nights", [None])) for name in names if name in entry.metrics]
    return min(counts, default=1)


def _entry_of(found: Found, otherwise: BaselineEntry | None) -> BaselineEntry | None:
    """The entry a look found; `otherwise` where the reference refused one."""
    return otherwise if isinstance(found, Refused) else found


def _replace(judgement: Judgement, outcome: Outcome, message: str) -> Judgement:
    return dataclasses.replace(judgement, outcome=outcome, message=message)


def no_data_reason(run: MeasuredRun, name: str) -> str:
    """Why this metric in particular has no value: each its own reason (its registry row's)."""
    return run.no_data_reason(name)
