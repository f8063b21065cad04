"""Judging: a measured run's gated metrics against a Reference (the stored baselines, or
OLD's runs in a paired session), or recorded as baselines under --update-baselines.

The verdict rule itself (baselines/compare.compare_metrics) is injected as `rule`; a
run's validity is validity.py's; the noise of each change comes from the paired
request-level errors, the repetitions on both sides and the spread pooled over the
other cells (docs/verdicts.md)."""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

from pytest_llmperf.baselines.compare import Status, compare_metrics, confirmed
from pytest_llmperf.baselines.crosscheck import OutputChange, compare_outputs
from pytest_llmperf.baselines.store import BaselineStore, sanitize_name, workload_key
from pytest_llmperf.history_log import HistoryLog, SharedLines
from pytest_llmperf.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.crosscheck import encode_outputs, output_rows
from pytest_llmperf.metrics.failures import ErrorBudget, failures, faults_note, parse_budget, stalls
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.metrics.uncertainty import encode_rows
from pytest_llmperf.noise import change_noise
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.outcome import GateRecord, InconclusiveWarning, Outcome, PerfFailure, SuspectWarning
from pytest_llmperf.reference import Entry, Identity, Reference, default_baseline_folder
from pytest_llmperf.report.crosscheck import canary_failure, check_lines, output_change_reason
from pytest_llmperf.report.explain import explanation
from pytest_llmperf.report.table import format_verdict_table, verdict_line
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.util.files import relative_to

NO_FAILURES = ErrorBudget(0.0)
STALLED = "no request completed, its server alive: made again on a fresh start"
Rule = Callable[..., list[Any]]  # compare_metrics' signature: the verdicts of the gated metrics


class Repeater(Protocol):
    """What the gate asks for more runs: the Measurer."""

    def worth_another(self, run: MeasuredRun, verdicts: list[Any], read_before: Collection[str] = ()) -> str | None: ...

    def extend(self, measured: MeasuredRun, why: str = "inconclusive", *, stalled: bool = False) -> bool: ...


class Gate:
    """The session's assertions: each judged (or recorded) and kept as a GateRecord."""

    def __init__(
        self,
        options: LlmperfOptions,
        store: BaselineStore,
        rootdir: Path,
        reference: Reference,
        repeater: Repeater,
        identity: Identity,
        *,
        target_kind: str,
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
        self.target_kind = target_kind  # the baseline folder where no GPU model names one
        self.ini_tolerances = dict(ini_tolerances or {})  # llmperf_tolerances, parsed by the plugin
        self.rule = rule
        self.history = HistoryLog(options, store.root, rootdir, identity, shared_history)
        self.records: list[GateRecord] = []
        self.folders: set[str] = set()  # the baseline folders judged or recorded in
        self.used: dict[str, set[tuple[int, str]]] = {}  # server file -> entries read or written

    def baseline_folder(self, run: MeasuredRun) -> str:
        """The folder of baselines/ this run is judged in: --llmperf-target-name, else per GPU
        model, else the target kind."""
        return self.options.target_name or default_baseline_folder(self.target_kind, run.provenance)

    def bind(
        self,
        run: MeasuredRun,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget | str | None = None,
    ) -> MeasuredRun:
        """`run` (cached, shared between tests) as one test sees it: its assertions are
        judged for `nodeid` with the test's marker tolerances and error budget (else
        --llmperf-error-budget)."""
        judge = functools.partial(
            self.judge,
            nodeid=nodeid,
            marker_tolerances=dict(marker_tolerances or {}),
            error_budget=self.options.error_budget if error_budget is None else parse_budget(error_budget),
        )
        return dataclasses.replace(run, judge=judge)

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
    ) -> None:
        """Judge (or record) for test `nodeid` the gated metrics' samples that `collect()`
        returns; auto repetitions call it again after each added run. `tolerances` (the
        assertion's) take precedence over `marker_tolerances` (the test's marker). A run
        beyond its error budget is invalid: never recorded, never passed."""
        samples = collect()
        target = self.baseline_folder(run)
        self.folders.add(target)
        for used in (run, base) if base is not None else (run,):
            key = workload_key(self.identity(used))
            self.used.setdefault(sanitize_name(used.server.name), set()).add((used.concurrency, key))
        path = self.store.path_for(target, run.server.name)
        record = GateRecord(nodeid, run.server.name, run.concurrency, relative_to(path, self.rootdir))
        self.records.append(record)
        invalid = self.reference.invalid(run, base, error_budget)
        if self.options.update_baselines:
            self._record(record, run, samples, base, target, invalid)
            return
        merged = {**(marker_tolerances or {}), **(tolerances or {})}
        verdicts, entry, invalid, outputs = self._verdicts_until_decided(
            record, run, collect, merged, base, target, invalid, error_budget
        )
        verdicts = confirmed(
            verdicts,
            self.options.confirm - 1 if self.reference.keeps_history else 0,
            lambda metric, count: self.history.earlier_outcomes(run, target, metric, count),
        )
        if self.reference.keeps_history:
            judged = [(v.metric, v.measured, v.status, v.noise, v.baseline, v.confidence) for v in verdicts]
            self.history.append(run, target, judged)
        record.verdicts = verdicts
        self._conclude(record, run, base, entry, target, invalid, outputs, error_budget)

    def _record(
        self,
        record: GateRecord,
        run: MeasuredRun,
        samples: Samples,
        base: MeasuredRun | None,
        target: str,
        invalid: str | None,
    ) -> None:
        """--update-baselines: the run's figures (a speedup: itself) become the baseline entry."""
        if invalid:
            record.outcome = Outcome.FAIL
            record.message = f"{run.server.name} @ concurrency {run.concurrency}: not recorded: invalid run: {invalid}"
            raise PerfFailure(record.message)
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
            target,
            run.server.name,
            run.concurrency,
            metrics,
            self.identity(run),
            provenance,
            requests=encode_rows(run.rows) if base is None else None,
            outputs=encode_outputs(output_rows(run.results[0].records)) if base is None and run.results else None,
        )
        self.history.append(run, target, [(n, median_of(samples[n]), "recorded", None, None, None) for n in samples])
        recorded = [name for name in samples if name not in missing]
        record.outcome = Outcome.RECORDED
        record.message = f"recorded {', '.join(recorded) or 'nothing'} in {record.baseline_path}"
        if missing:
            record.outcome = Outcome.FAIL
            reasons = "; ".join(f"{name}: {no_data_reason(run, name)}" for name in missing)
            record.message += f"; not recorded, no data: {reasons}"
            raise PerfFailure(record.message)

    def _verdicts_until_decided(
        self,
        record: GateRecord,
        run: MeasuredRun,
        collect: Callable[[], Samples],
        tolerances: Mapping[str, str],
        base: MeasuredRun | None,
        target: str,
        invalid: str | None,
        error_budget: ErrorBudget = NO_FAILURES,
    ) -> tuple[list[Any], Entry | None, str | None, OutputChange | None]:
        """The verdicts, with runs added by auto repetitions while they ask for more; the
        entry judged against, why the run is invalid (outputs included), and the outputs' change."""
        entry = self.reference.entry(run, base, record, target)
        invalid, outputs = self._check_outputs(run, entry, record, invalid)
        command = self.reference.update_command(record.nodeid)
        looks = 0
        read_before: list[str] = []  # the metrics the look before read `regressed`
        while True:
            entry = self.reference.refresh(entry, run, base)
            verdicts = self._verdicts(run, entry, collect(), tolerances, command, base, target, invalid)
            looks += 1
            if invalid:
                # A run that completed nothing while its server lives: once more on a fresh start
                # (the repeater says whether this one is such a run: Measurer.can_retry).
                if looks > 1 or not self.repeater.extend(run, STALLED, stalled=True):
                    return verdicts, entry, invalid, outputs
                invalid, outputs = self._check_outputs(
                    run, entry, record, self.reference.invalid(run, base, error_budget)
                )
                continue
            why = self.repeater.worth_another(run, verdicts, read_before=read_before)
            if why is None or not self.repeater.extend(run, why):
                return verdicts, entry, invalid, outputs
            read_before = [v.metric for v in verdicts if v.status == Status.REGRESSED]

    def _conclude(
        self,
        record: GateRecord,
        run: MeasuredRun,
        base: MeasuredRun | None,
        entry: Entry | None,
        target: str,
        invalid: str | None,
        outputs: OutputChange | None,
        error_budget: ErrorBudget,
    ) -> None:
        """The record's message and outcome from its verdicts; PerfFailure where it fails,
        InconclusiveWarning where undecided under --llmperf-inconclusive warn."""
        verdicts = record.verdicts
        runs = [*run.results, *(base.results if base is not None else [])]
        faults = faults_note(
            (failures(r.records, r.attempted) for r in runs),
            (stalls(r.records, r.clock_speed) for r in runs),
            error_budget,
        )
        undecided = [v for v in verdicts if v.status == Status.INCONCLUSIVE]
        suspect = [v for v in verdicts if v.status == Status.SUSPECT]
        policy = self.options.inconclusive
        failing = [
            v
            for v in verdicts
            if not v.ok and v.status != Status.SUSPECT and (v.status != Status.INCONCLUSIVE or policy == "fail")
        ]
        if entry is not None:
            explain_record(
                record,
                run,
                entry,
                explain=bool(failing) or any(v.status == Status.IMPROVED for v in verdicts),
                valid=not invalid,
            )
        record.message = format_verdict_table(
            verdicts,
            title=self.reference.title(run, record, target),
            faults=None if invalid else faults,
            explanation=record.explanation,
        )
        if record.checks:
            record.message += "\n" + "\n".join(record.checks)
        canary = None if invalid else canary_failure(outputs, self.options.changed_outputs)
        if canary:
            record.message += f"\n{canary}"
        spent = [note for note in run.notes if note.startswith("auto repetitions stopped")]
        if undecided and spent:
            record.message += f"\n{spent[0]}"
        if failing or canary:
            record.outcome = Outcome.FAIL
            raise PerfFailure(record.message, headline=verdict_line(failing) if failing else canary)
        if suspect:
            record.outcome = Outcome.WARN
            needed = self.options.confirm
            message = (
                f"suspect: {', '.join(v.metric for v in suspect)} read a regression that the sessions before did not; "
                f"it fails when {needed} sessions in a row read it (the llmperf summary has its table, without -q)"
            )
            warnings.warn(SuspectWarning(message), stacklevel=4)
        if undecided and policy == "warn":
            record.outcome = Outcome.WARN
            message = "inconclusive: the noise was too wide to tell (the llmperf summary has its table, without -q)"
            warnings.warn(InconclusiveWarning(message), stacklevel=4)

    def _check_outputs(
        self, run: MeasuredRun, entry: Entry | None, record: GateRecord, invalid: str | None
    ) -> tuple[str | None, OutputChange | None]:
        """The run's outputs against the entry's (baselines/crosscheck.py): the canary's line
        and the checks not run go on `record`; returns why the run is invalid (`invalid` as
        given, else output lengths or the EOS share moved beyond their bounds) and the change."""
        if entry is None or not run.results:
            return invalid, None
        first = next((r for r in run.results if r.completed), run.results[0])  # a stalled start's made again
        change = compare_outputs(entry, run.rows, output_rows(first.records))
        record.checks = check_lines(change, "requests" in entry, "outputs" in entry, self.options.changed_outputs)
        return invalid or output_change_reason(change), change

    def _verdicts(
        self,
        run: MeasuredRun,
        entry: Entry | None,
        samples: Samples,
        tolerances: Mapping[str, str],
        command: str,
        base: MeasuredRun | None,
        target: str,
        invalid: str | None,
    ) -> list[Any]:
        measured = {name: median_of(values) for name, values in samples.items()}
        no_data = {name: no_data_reason(run, name) for name in samples if measured.get(name) is None}
        # The spread between the sessions before, where the reference keeps a history (a paired session's does not).
        keeps = entry and self.reference.keeps_history
        nightly = self.history.nightly_spreads(run, target, list(samples)) if keeps else None
        # The fewest requests a run on either side completed: statistics over requests from
        # fewer than the registry's min_requests are not judged.
        counts = [r.completed for r in run.results]
        if entry:
            counts += [c for c in entry["metrics"].get("completed", {}).get("samples", ()) if c is not None]
        return self.rule(
            list(samples),
            entry["metrics"] if entry else None,
            measured,
            overrides=(tolerances, self.ini_tolerances),
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
                self.reference.spread_pools(target, run, list(samples)) if entry else {},
                base,
                self.reference.base_entry(base, target) if entry and base is not None else None,
                nightly,
            ),
        )


def explain_record(record: GateRecord, run: MeasuredRun, entry: Entry, *, explain: bool, valid: bool) -> None:
    """The baseline's figures on the record; under a failing or improved table, what
    changed between the baseline's provenance and the run's (report/explain.py)."""
    record.baseline_figures = {name: m["value"] for name, m in entry["metrics"].items()}
    record.baseline_provenance = dict(entry["provenance"])
    if not explain:
        return
    # An invalid run's figures explain nothing; what changed may (a new image that crashes).
    speculative = run.server.is_speculative and valid
    lines, changes, attribution = explanation(
        entry["provenance"], run.provenance, record.baseline_figures, run.figures, speculative
    )
    record.explanation = lines
    record.changes = [change.describe() for change in changes]
    record.attribution = attribution.to_dict() if attribution is not None else None


def no_data_reason(run: MeasuredRun, name: str) -> str:
    """Why this metric in particular has no value: each its own reason (its registry row's)."""
    return run.no_data_reason(name)
