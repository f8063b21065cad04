"""What a run is judged against: a Reference. The base class holds the defaults (the
stored baselines' title, validity and record command, no pooled spread); `StoredBaseline`
reads the baseline files, paired.PairedReference makes OLD's runs of a paired session into
an entry, saved_reference.SavedReference a saved run (`llmperf compare`): each overrides
only what differs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.baselines.comparable import check_compatible, incompatibility_message, other_workload_message
from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.store import BaselineStore, sanitize_name, workload_key
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.validity import invalid_reason
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.stats.spread import Spread, spread_pools

Identity = Callable[[MeasuredRun], dict[str, Any]]  # a run's workload identity (PromptBook.workload_identity)


@dataclass(frozen=True)
class Refused:
    """A stored entry the run may not be judged against: recorded under another workload or
    hardware (`others`: how many entries of other workloads there are, 0 where the run's own
    workload's entry differs), with what differs."""

    differences: list[str]
    others: int = 0

    def message(self, where: str, concurrency: int, command: str) -> str:
        if self.others:
            return other_workload_message(where, concurrency, self.differences, command, self.others)
        return incompatibility_message(where, concurrency, self.differences, command)


Found = BaselineEntry | Refused | None  # what Reference.entry finds (None: nothing recorded)


class Reference:
    """What a run is judged against: the entry (`entry`) and the spread pooled over other
    cells (`spread_pools`); the rest are defaults a reference overrides where it differs."""

    keeps_history = True  # the verdicts go to the history file
    recorded = True  # its entries are recorded ones, their level over recording nights (entries.py)
    options: LlmperfOptions

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str) -> Found:
        """The entry `run` (a speedup: over `base`) is judged against; asked again after auto
        repetitions added runs."""
        raise NotImplementedError

    def spread_pools(self, baseline_folder: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """Per metric, the between-start spread pooled over other cells at this concurrency."""
        return {}

    def reads_again(self, base: MeasuredRun | None) -> str | None:
        """What a flagged cell is read again on at once (judging/read_again.py), or None: a
        speedup (over `base`) on fresh MTP + base pairs, whose ratio cancels the night's shift
        of the box; a server's own figures carry that shift, so only the next night reads them."""
        return "MTP + base pair" if base is not None else None

    def again(
        self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str, last: int, entry: BaselineEntry | None
    ) -> BaselineEntry | None:
        """The entry the `last` runs made to read a flagged cell again are judged against:
        `entry`, the one the first look had (a stored entry does not move within a session)."""
        return entry

    def where(self, run: MeasuredRun, path: str) -> str:
        """Where the entry lives, for tables (`path`: the run's baseline file)."""
        return path

    def title(self, run: MeasuredRun, where: str, baseline_folder: str) -> str:
        title = f"{run.server.name} @ concurrency {run.concurrency} vs {where} [{baseline_folder}]"
        if len(run.results) > 1:
            title += f" ({len(run.results)} repetitions)"
        return title

    def invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        """Why the gate cannot judge: the run's or its base run's invalid reason."""
        return invalid_reason(run, budget) or (invalid_reason(base, budget) if base is not None else None)

    def update_command(self, nodeid: str) -> str:
        """The command that records the baselines this test asks for."""
        return record_command(self.options, nodeid)


def default_baseline_folder(kind: str, provenance: Mapping[str, Any]) -> str:
    """Where baselines live: per GPU model for GPUs, else per kind of target."""
    if provenance.get("gpu_name"):
        return str(provenance["gpu_name"])
    return kind


def published_figures(store: BaselineStore) -> Callable[[str, int], dict[str, float]]:
    """A server's published figures at a concurrency (baselines/<server>.published.json), shown beside its runs."""

    def figures(server: str, concurrency: int) -> dict[str, float]:
        published = store.load_published(server)
        return published.figures(concurrency) if published else {}

    return figures


def stored_cells(
    store: BaselineStore, identity: Identity, baseline_folder: str, run: MeasuredRun, *, own: bool
) -> list[Mapping[str, list[float | None]]]:
    """Each entry recorded at `run`'s concurrency in the baseline folder, as its metrics'
    per-repetition samples; `own`: with the entry of `run`'s own server and workload."""
    mine = (sanitize_name(run.server.name), workload_key(identity(run)))
    return [
        {name: m["samples"] for name, m in entry["metrics"].items() if "samples" in m}
        for server, key, entry in store.entries_at(baseline_folder, run.concurrency)
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


class StoredBaseline(Reference):
    """The baseline files: the entry of the run's server, concurrency and workload."""

    def __init__(self, options: LlmperfOptions, store: BaselineStore, identity: Identity) -> None:
        self.options = options
        self.store = store
        self.identity = identity

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str) -> Found:
        """The stored entry of `run`'s workload (None: none). A stored entry of another
        workload or hardware is refused, saying what differs."""
        workload = self.identity(run)
        baseline = self.store.load(baseline_folder, run.server.name)
        entry = baseline.entry(run.concurrency, workload) if baseline else None
        if entry is not None:
            differences = check_compatible(entry["workload"], workload, entry["provenance"], run.provenance)
            return Refused(differences) if differences else BaselineEntry.from_dict(entry)
        if baseline is not None and (others := baseline.others(run.concurrency, workload)):
            # Entries of other workloads only: say what differs rather than "missing".
            differences = min(
                (check_compatible(o["workload"], workload, o["provenance"], run.provenance) for o in others), key=len
            )
            return Refused(differences, len(others))
        return None

    def spread_pools(self, baseline_folder: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """The between-start spread of the other cells of this baseline folder at this concurrency,
        which move alike in relative terms, on more degrees of freedom (docs/verdicts.md)."""
        return spread_pools(stored_cells(self.store, self.identity, baseline_folder, run, own=False), names)
