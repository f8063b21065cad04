"""What a run is judged against: a Reference. `StoredBaseline` reads the baseline files;
paired.PairedReference makes OLD's runs of a paired session into the same shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pytest_llmperf.baselines.comparable import check_compatible, incompatibility_message, other_workload_message
from pytest_llmperf.baselines.store import BaselineStore, sanitize_name, workload_key
from pytest_llmperf.measured import MeasuredRun
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.outcome import GateRecord, Outcome, PerfFailure
from pytest_llmperf.stats.spread import Spread, spread_pools
from pytest_llmperf.validity import invalid_reason

Entry = Mapping[str, Any]  # a baseline entry: workload, provenance, metrics, requests, outputs (store.py)
Identity = Callable[[MeasuredRun], dict[str, Any]]  # a run's workload identity (PromptBook.workload_identity)


class Reference(Protocol):
    """The entry a run is judged against, and what the gate says of it."""

    keeps_history: bool  # the verdicts go to the history file

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, record: GateRecord, target: str) -> Entry | None:
        """The entry `run` is judged against (None: none); PerfFailure where it cannot be."""
        ...

    def refresh(self, entry: Entry | None, run: MeasuredRun, base: MeasuredRun | None) -> Entry | None:
        """The entry after auto repetitions added runs."""
        ...

    def base_entry(self, base: MeasuredRun, target: str) -> Entry | None:
        """The entry a speedup's base run is judged against (for the speedup's noise)."""
        ...

    def spread_pools(self, target: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """Per metric, the between-start spread pooled over other cells at this concurrency."""
        ...

    def title(self, run: MeasuredRun, record: GateRecord, target: str) -> str: ...

    def invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        """Why the gate cannot judge: the run's or its base run's invalid reason."""
        ...

    def update_command(self, nodeid: str) -> str:
        """The command that records the baselines this test asks for."""
        ...


def default_baseline_folder(kind: str, provenance: Mapping[str, Any]) -> str:
    """Where baselines live: per GPU model for GPUs, else per kind of target."""
    if provenance.get("gpu_name"):
        return str(provenance["gpu_name"])
    return kind


def stored_cells(
    store: BaselineStore, identity: Identity, target: str, run: MeasuredRun, *, own: bool
) -> list[Mapping[str, list[float | None]]]:
    """Each entry recorded at `run`'s concurrency in `target`'s folder, as its metrics'
    per-repetition samples; `own`: with the entry of `run`'s own server and workload."""
    mine = (sanitize_name(run.server.name), workload_key(identity(run)))
    return [
        {name: m["samples"] for name, m in entry["metrics"].items() if "samples" in m}
        for server, key, entry in store.entries_at(target, run.concurrency)
        if own or (sanitize_name(server), key) != mine
    ]


def record_command(options: LlmperfOptions, nodeid: str) -> str:
    """`pytest NODEID --<target flag> --update-baselines`, with the profile where not full."""
    kind = options.target_kind
    flag = (kind.flag or f"--llmperf-target {kind.name}") if kind is not None else ""
    if kind is not None and not kind.starts_servers and options.base_url:
        flag += f" {options.base_url}"  # the server someone else runs
    extra = f" --llmperf-profile {options.profile}" if options.profile != "full" else ""
    return f"pytest '{nodeid}' {flag}{extra} --update-baselines".replace("  ", " ")


class StoredBaseline:
    """The baseline files: the entry of the run's server, concurrency and workload."""

    keeps_history = True

    def __init__(self, options: LlmperfOptions, store: BaselineStore, identity: Identity) -> None:
        self.options = options
        self.store = store
        self.identity = identity

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, record: GateRecord, target: str) -> Entry | None:
        """The stored entry of `run`'s workload (None: none). A stored entry of another
        workload or hardware is refused (PerfFailure), saying what differs."""
        workload = self.identity(run)
        command = self.update_command(record.nodeid)
        baseline = self.store.load(target, run.server.name)
        entry = baseline.entry(run.concurrency, workload) if baseline else None
        if entry is not None:
            differences = check_compatible(entry["workload"], workload, entry["provenance"], run.provenance)
            if differences:
                record.outcome = Outcome.REFUSED
                record.message = incompatibility_message(record.baseline_path, run.concurrency, differences, command)
                raise PerfFailure(record.message)
        elif baseline is not None and (others := baseline.others(run.concurrency, workload)):
            # Entries of other workloads only: say what differs rather than "missing".
            differences = min(
                (check_compatible(o["workload"], workload, o["provenance"], run.provenance) for o in others), key=len
            )
            record.outcome = Outcome.REFUSED
            record.message = other_workload_message(
                record.baseline_path, run.concurrency, differences, command, len(others)
            )
            raise PerfFailure(record.message)
        return entry

    def refresh(self, entry: Entry | None, run: MeasuredRun, base: MeasuredRun | None) -> Entry | None:
        return entry  # a stored entry does not change

    def base_entry(self, base: MeasuredRun, target: str) -> Entry | None:
        base_file = self.store.load(target, base.server.name)
        return base_file.entry(base.concurrency, self.identity(base)) if base_file else None

    def spread_pools(self, target: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """The between-start spread of the other cells of this target at this concurrency, which
        moves alike in relative terms, on more degrees of freedom (docs/verdicts.md)."""
        return spread_pools(stored_cells(self.store, self.identity, target, run, own=False), names)

    def title(self, run: MeasuredRun, record: GateRecord, target: str) -> str:
        title = f"{run.server.name} @ concurrency {run.concurrency} vs {record.baseline_path} [{target}]"
        if len(run.results) > 1:
            title += f" ({len(run.results)} repetitions)"
        return title

    def invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        return invalid_reason(run, budget) or (invalid_reason(base, budget) if base is not None else None)

    def update_command(self, nodeid: str) -> str:
        return record_command(self.options, nodeid)
