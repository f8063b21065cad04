"""Paired A/B runs: is NEW as fast as OLD on this box, today?

`--llmperf-against-image OLD` / `--llmperf-against-sim-args OLD_FLAGS`: every run is measured
with OLD and NEW on the same box and prompts, in blocks of alternating order (PairedBlocks:
more blocks while inconclusive, within the repetition caps). NEW is judged by gate.Gate
against a PairedReference, a baseline-like entry built from OLD's runs (docs/verdicts.md);
stored baselines are never judged against nor written.
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.store import BaselineStore
from pytest_llmperf.judging.reference import Identity, Reference, stored_cells
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.measurer import Measurer, finished_cleanly, stop_if_interrupted
from pytest_llmperf.measuring.preflight import PlannedTest
from pytest_llmperf.measuring.validity import invalid_reason
from pytest_llmperf.metrics.crosscheck import encode_outputs, output_rows
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.registry import GATED_DECODE, SPEEDUP
from pytest_llmperf.metrics.uncertainty import encode_rows
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.stats.error import wider
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.stats.spread import Spread, spread_pools
from pytest_llmperf.workload.workload import Workload

OLD, NEW = "A", "B"  # how the start order names them


@dataclass(frozen=True)
class Variants:
    """The two "images" of a paired run: container images, or the simulator's flags."""

    kind: str  # "image" or "sim args"
    old: str  # an image reference, or the flags as one shell-quoted string ("" for defaults)
    new: str

    @classmethod
    def from_options(cls, options: LlmperfOptions) -> Variants:
        if options.against_image is not None:
            if not options.image:
                raise ValueError("a paired run needs --llmperf-image NEW beside --llmperf-against-image OLD")
            return cls("image", options.against_image, options.image)
        if options.against_sim_args is None:
            raise ValueError("not a paired run: no --llmperf-against-image or --llmperf-against-sim-args")
        return cls("sim args", shlex.join(options.against_sim_args), shlex.join(options.sim_args))

    def label(self, role: str) -> str:
        """'image vllm/vllm-openai:v0.32' or "sim args '--sim-step-time-scale 1.05'"."""
        value = self.old if role == OLD else self.new
        if self.kind == "image":
            return f"image {value}"
        return f"sim args {shlex.quote(value)}" if value else "sim args (defaults)"

    def spec(self, spec: ServerSpec, role: str) -> ServerSpec:
        value = self.old if role == OLD else self.new
        if self.kind == "image":
            return spec.with_image(value)
        return dataclasses.replace(spec, sim_args=(*spec.sim_args, *shlex.split(value)))

    def new_flag(self) -> str:
        """What records NEW's baselines, once it is adopted."""
        if self.kind == "image":
            return f"--llmperf-image {shlex.quote(self.new)}"
        return f"--llmperf-sim-args={shlex.quote(self.new)}" if self.new else ""


# Blocks before the first judgement under auto: A B, B A.
AUTO_FIRST_BLOCKS = 2


def count_starts(runs: Sequence[tuple[str, Workload]], blocks: int, same_server: bool) -> int:
    """Server starts of a paired session: each run a fresh start, unless --llmperf-same-server
    reuses a variant still running from the previous run (B then B across blocks)."""
    if not same_server:
        return 2 * blocks * len(runs)
    starts, running = 0, None
    for name, _ in runs:
        for block in range(blocks):
            for role in (OLD, NEW) if block % 2 == 0 else (NEW, OLD):
                if running != (name, role):
                    starts, running = starts + 1, (name, role)
    return starts


def first_blocks(options: LlmperfOptions) -> int:
    """The blocks a paired run makes before judging: the count asked for, or under auto
    two (within --llmperf-max-repetitions)."""
    if options.repetitions == "auto":
        return min(AUTO_FIRST_BLOCKS, options.max_repetitions)
    return int(options.repetitions)


def cost_line(options: LlmperfOptions, plans: Iterable[PlannedTest]) -> str:
    """The cost of a paired session, said before anything starts: "2 servers x 2 images x 1
    block: about 4 server starts"."""
    variants = Variants.from_options(options)
    runs: list[tuple[str, Workload]] = []
    unknown = 0
    for plan in plans:
        if not plan.workloads:
            unknown += 1
        for spec in plan.servers:
            for workload in plan.workloads:
                if (spec.name, workload) not in runs:
                    runs.append((spec.name, workload))
    servers = len({name for name, _ in runs})
    auto = options.repetitions == "auto"
    blocks = first_blocks(options)
    what = "container" if options.target_kind is not None and options.target_kind.containers else "server"
    starts = count_starts(runs, blocks, options.same_server)
    line = (
        f"paired A/B: {variants.label(NEW)} (B) against {variants.label(OLD)} (A), blocks A B, B A, ...; "
        f"{servers} server{'s' * (servers != 1)} x 2 images x {blocks} block{'s' * (blocks != 1)}"
        + (f" ({len(runs)} runs of a server at a concurrency)" if len(runs) != servers else "")
        + f": about {starts} {what} starts"
    )
    if auto and options.max_repetitions > 1:
        most = count_starts(runs, options.max_repetitions, options.same_server)
        line += f"; auto adds blocks while a verdict is inconclusive, up to {options.max_repetitions}: at most {most}"
    if unknown:
        line += f"; and {unknown} test(s) whose concurrency is known only when they run"
    return line


def _metric_entry(values: Iterable[float | None]) -> dict[str, Any] | None:
    """A metric of a baseline entry from one side's repetitions; None when none has it."""
    present = [v for v in values if v is not None]
    return {"value": median_of(present), "samples": present} if present else None


class PairedBlocks:
    """The repetition policy of a paired session: every run of a server is a block of OLD
    and NEW, on fresh starts, in alternating order; `against` keeps OLD's run beside NEW's."""

    # Blocks are added while an unchanged value could still be shown within tolerance,
    # whatever change was read: at two blocks a side it is mostly noise (docs/verdicts.md).
    stop_on_change = False
    # Both sides grow with every block: the noise falls about as the square root of the blocks.
    project_noise = False

    def __init__(self, options: LlmperfOptions) -> None:
        self.options = options
        self.variants = Variants.from_options(options)
        # NEW's (spec, workload) key -> OLD's run of the same server and workload.
        self.against: dict[tuple[ServerSpec, Workload], MeasuredRun] = {}
        # Every server start, in order: {"server", "role" (A: OLD, B: NEW), "label"}.
        self.order: list[dict[str, str]] = []

    def effective(self, spec: ServerSpec) -> ServerSpec:
        return self.variants.spec(spec, NEW)

    def info(self) -> dict[str, Any]:
        """For the report document: what was paired, and the start order."""
        return {
            "kind": self.variants.kind,
            "old": self.variants.old,
            "new": self.variants.new,
            "old_label": self.variants.label(OLD),
            "new_label": self.variants.label(NEW),
            "order": list(self.order),
        }

    def first(self, measurer: Measurer, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """NEW's run of `spec`, its OLD twin beside it (`against`): the planned blocks (two
        under auto, since one run a side says nothing of the spread between starts)."""
        new = measurer.blank(self.effective(spec), workload)
        old = measurer.blank(self.variants.spec(spec, OLD), workload)
        self.against[(new.server, workload)] = old
        for _ in range(first_blocks(self.options)):
            if not self._block(measurer, old, new):
                break
        return new

    def stop_if_interrupted(self, measured: MeasuredRun) -> None:
        stop_if_interrupted(measured)
        stop_if_interrupted(self.old(measured))

    def more(self, measurer: Measurer, measured: MeasuredRun, why: str) -> bool:
        """One more block of OLD and NEW."""
        old = self.against.get((measured.server, measured.workload))
        if old is None or not finished_cleanly(old):
            return False
        count = len(measured.results) + 1
        bound = f" of at most {self.options.max_repetitions}" if count <= self.options.max_repetitions else ""
        measurer.log(f"{measured.server.name} @ concurrency {measured.concurrency}: {why}, paired block {count}{bound}")
        self._block(measurer, old, measured)
        stop_if_interrupted(measured)
        stop_if_interrupted(old)
        return True

    def _block(self, measurer: Measurer, old: MeasuredRun, new: MeasuredRun) -> bool:
        """One block: A B when an even number of blocks ran before, else B A. False when a
        run broke (interrupted, nothing completed, its server died): nothing more to learn."""
        first = len(new.results) % 2 == 0
        for measured in (old, new) if first else (new, old):
            role = OLD if measured is old else NEW
            started = len(measurer.pool.starts)
            endpoint = measurer.start(measured, fresh=True, announce=False)  # each run on a fresh start
            if len(measurer.pool.starts) > started:
                self.order.append({"server": measured.server.name, "role": role, "label": self.variants.label(role)})
            if endpoint is None or not measurer.repeat(measured, endpoint):
                return False
        return True

    def old(self, run: MeasuredRun) -> MeasuredRun:
        old = self.against.get((run.server, run.workload))
        if old is None:
            raise RuntimeError(f"{run.server.name} @ concurrency {run.concurrency}: no OLD run beside it")
        return old


def night_scale(
    tonight: Sequence[Mapping[str, list[float | None]]], stored: Sequence[Mapping[str, list[float | None]]]
) -> float | None:
    """How many times the stored entries' variance between starts tonight's runs show, by
    the gated decode figure, where it is wider beyond chance (stats.error.wider); else None."""
    mine = spread_pools(tonight, [GATED_DECODE]).get(GATED_DECODE)
    quiet = spread_pools(stored, [GATED_DECODE]).get(GATED_DECODE)
    if mine is None or quiet is None or not wider(mine, quiet.variance):
        return None
    return mine.variance / quiet.variance


class PairedReference(Reference):
    """NEW judged against OLD's runs of the same server and workload, made into a baseline
    entry; no history is written (docs/history.md) and the baselines folder stays untouched."""

    keeps_history = False
    recorded = False

    def __init__(
        self,
        options: LlmperfOptions,
        blocks: PairedBlocks,
        runs: Mapping[tuple[ServerSpec, Workload], MeasuredRun],
        store: BaselineStore,
        identity: Identity,
    ) -> None:
        self.options = options
        self.blocks = blocks
        self.variants = blocks.variants
        self.runs = runs  # NEW's runs of the session, for the spread pooled over its cells
        self.store = store
        self.identity = identity

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str) -> BaselineEntry:
        """OLD's runs of `run`'s server and workload as a baseline entry, with the speedup over
        OLD's base run for a speedup gate; the blocks auto repetitions add ran OLD too."""
        return self._entry(run, base)

    def reads_again(self, base: MeasuredRun | None) -> str | None:
        """Every flagged cell, on fresh blocks (of MTP and base, for a speedup): OLD and NEW
        share the night, so fresh blocks read it as independently as another night would."""
        return "paired block" if base is None else "paired block of MTP and base"

    def again(
        self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str, last: int, entry: BaselineEntry | None
    ) -> BaselineEntry:
        """OLD's `last` runs, the fresh blocks' own, as the entry (their NEW runs are judged against them)."""
        return self._entry(run, base, last)

    def _entry(self, run: MeasuredRun, base: MeasuredRun | None, last: int | None = None) -> BaselineEntry:
        old = self.blocks.old(run)
        sides = {name: values[-last:] if last else values for name, values in old.samples.items()}
        if base is not None:
            sides[SPEEDUP] = old.speedup_samples(self.blocks.old(base), last=last)
        metrics = {name: m for name, values in sides.items() if (m := _metric_entry(values)) is not None}
        return BaselineEntry(
            workload=self.identity(old),
            provenance=dict(old.provenance),
            metrics=metrics,
            requests=encode_rows(old.rows) if old.rows else None,
            # for the early-stop check and the output canary (baselines/crosscheck.py)
            outputs=encode_outputs(output_rows(old.results[0].records)) if old.results else None,
        )

    def spread_pools(self, baseline_folder: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """The between-start spread pooled over this session's other paired cells at this
        concurrency and every stored entry there, this server's included (their values are
        not judged against): two blocks give a side one degree of freedom (docs/verdicts.md).
        On a night noisier than the stored entries' recording night (tonight's steady decode,
        this cell's both sides included, spread wider beyond chance), tonight's other cells
        alone, and where they have no value of a metric (the speedup), the stored spread
        times tonight's ratio: the quieter night would understate tonight's noise."""
        others: list[Mapping[str, list[float | None]]] = []
        tonight: list[Mapping[str, list[float | None]]] = []
        for key, new in self.runs.items():
            if new.concurrency != run.concurrency:
                continue
            sides = [new.samples, *([self.blocks.against[key].samples] if key in self.blocks.against else [])]
            tonight += sides
            if key != (run.server, run.workload):
                others += sides
        stored = stored_cells(self.store, self.identity, baseline_folder, run, own=True)
        pools = spread_pools([*others, *stored], names)
        scale = night_scale(tonight, stored)
        if scale is None:
            return pools
        own, quiet = spread_pools(others, names), spread_pools(stored, names)
        for name in names:
            if name in own:
                pools[name] = own[name]
            elif name in quiet:
                pools[name] = Spread(quiet[name].variance * scale, quiet[name].dof)
            else:
                pools.pop(name, None)
        return pools

    def where(self, run: MeasuredRun, path: str) -> str:
        return f"{self.variants.label(OLD)} (paired)"

    def title(self, run: MeasuredRun, where: str, baseline_folder: str) -> str:
        blocks = len(run.results)
        return (
            f"{run.server.name} @ concurrency {run.concurrency}: {self.variants.label(NEW)} vs "
            f"{self.variants.label(OLD)} (paired, {blocks} block{'s' * (blocks != 1)}) [{baseline_folder}]"
        )

    def invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        reason = super().invalid(run, base, budget)
        if reason:
            return f"{self.variants.label(NEW)}: {reason}"
        for mine in (run, base):
            if mine is None:
                continue
            why = invalid_reason(self.blocks.old(mine), budget)
            if why:
                return f"{self.variants.label(OLD)} (what NEW is judged against): {why}"
        return None

    def update_command(self, nodeid: str) -> str:
        """Accepting NEW's level means recording NEW as the baselines (not in paired mode)."""
        command = super().update_command(nodeid)
        flag = self.variants.new_flag()
        return command.replace(" --update-baselines", f" {flag} --update-baselines") if flag else command
