"""Paired A/B runs: is NEW as fast as OLD on this box, today?

`--llmperf-against-image OLD` with `--llmperf-image NEW` (GPU and Docker targets), or on
the simulator `--llmperf-against-sim-args OLD_FLAGS` with `--llmperf-sim-args NEW_FLAGS`:
every run of the suite (server, concurrency, workload) is measured with both, on the
same box, with the same prompts and the same warm-ups, one server at a time, in blocks
whose order alternates (A B, B A, A B, ...: a drift over the session weighs on both
alike). Under `--llmperf-repetitions auto` two blocks run up front, and another follows
while a gated metric is inconclusive and an unchanged value could still be shown within
its tolerance (PairedSession.STOP_ON_CHANGE), or is regressed at the first look (read
again: compare.wanting_another), within `--llmperf-max-repetitions` (8 blocks unless
given) and `--llmperf-repetition-budget`.

NEW is judged by the baselines' own gate (session.PerfSession.gate): OLD's runs are made
into a baseline-like entry (per-repetition samples, their median, OLD's first
repetition's request lines, its provenance), so the rule, the metric directions, the
tolerances and the noise (the paired request-level bootstrap plus the spread between
repetitions on each side) are the ones docs/verdicts.md describes. A speedup test
judges NEW's MTP speedup against OLD's. Stored baselines are never judged against nor
written; their spread between starts is pooled with the blocks' (_spread_pools).
"""

from __future__ import annotations

import dataclasses
import shlex
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.baselines.compare import Spread
from pytest_llmperf.measured import MeasuredRun
from pytest_llmperf.metrics.crosscheck import encode_outputs, output_rows
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.uncertainty import encode_rows
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.session import GateRecord, PerfSession, PlannedTest, spread_pools
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
    """Server (container) starts of a paired session: every run of a variant is a fresh
    start, as repetitions are, unless --llmperf-same-server, where a variant still
    running from the previous run (B then B across blocks) is reused."""
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
    what = "container" if options.target in ("gpu", "docker") else "server"
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
    return {"value": statistics.median(present), "samples": present} if present else None


class PairedSession(PerfSession):
    """A PerfSession whose runs are paired blocks of OLD and NEW, and whose gate judges
    NEW against OLD's runs instead of a baseline file."""

    # Blocks are added while an unchanged value could be shown within the tolerance by the
    # budget, wherever the change was read: both sides grow with every block, and with two
    # blocks a side the change read is mostly the noise between starts. Stopping on it (a
    # change of 2 % read against a 3 % tolerance) left an unchanged image inconclusive in 12
    # of 100 trials, 9 of 100 with 8 blocks (benchmarks/paired_power.py, docs/verdicts.md).
    STOP_ON_CHANGE = False
    # Both sides grow with every block, so the noise falls about as the square root of
    # the blocks, as Verdict.decidable assumes without a projection.
    PROJECT_NOISE = False

    def __init__(self, options: LlmperfOptions, *args: Any, **kwargs: Any) -> None:
        super().__init__(options, *args, **kwargs)
        self.variants = Variants.from_options(options)
        # NEW's (spec, workload) key -> OLD's run of the same server and workload.
        self.against: dict[tuple[ServerSpec, Workload], MeasuredRun] = {}
        # Every server start, in order: {"server", "role" (A: OLD, B: NEW), "label"}.
        self.order: list[dict[str, str]] = []

    def _effective(self, spec: ServerSpec) -> ServerSpec:
        return self.variants.spec(spec, NEW)

    def paired_info(self) -> dict[str, Any]:
        """For the report document: what was paired, and the start order."""
        return {
            "kind": self.variants.kind,
            "old": self.variants.old,
            "new": self.variants.new,
            "old_label": self.variants.label(OLD),
            "new_label": self.variants.label(NEW),
            "order": list(self.order),
        }

    # -- measuring ---------------------------------------------------------------

    @property
    def planned_repetitions(self) -> int:
        """Blocks made up front: the count asked for; under auto two (A B, B A), since one
        run a side says nothing of the spread between starts, which a single block's
        difference holds in full (a 7 % false-alarm rate at 32 streams with one block:
        benchmarks/paired_power.py)."""
        return first_blocks(self.options)

    def run(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """NEW's run of `spec` under `workload`, its OLD twin beside it (self.against):
        the planned blocks (two under auto), once per session."""
        new_spec = self._effective(spec)
        key = (new_spec, workload)
        if key in self.runs:
            return self.runs[key]
        new, old = self._blank(new_spec, workload), self._blank(self.variants.spec(spec, OLD), workload)
        self.against[key] = old
        for _ in range(self.planned_repetitions):
            if not self._block(old, new):
                break
        self.run_count += 1
        self.runs[key] = new
        self._stop_if_interrupted(new)
        self._stop_if_interrupted(old)
        return new

    def _blank(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        return MeasuredRun(
            server=spec,
            workload=workload,
            results=[],
            samples={},
            provenance={},
            published=self._published(spec, workload.concurrency),
        )

    def _block(self, old: MeasuredRun, new: MeasuredRun) -> bool:
        """One block: A B when an even number of blocks ran before, else B A. False when a
        run broke (interrupted, nothing completed, its server died): nothing more to learn."""
        first = len(new.results) % 2 == 0
        for measured in (old, new) if first else (new, old):
            if not self._one(measured, OLD if measured is old else NEW):
                return False
        return True

    def _one(self, measured: MeasuredRun, role: str) -> bool:
        spec = measured.server
        started = len(self.pool.starts)
        # Each run on a fresh start, as repetitions are (the spread between them then holds
        # what moves between starts); --llmperf-same-server reuses the variant still running.
        endpoint = self.pool.endpoint(spec) if self.options.same_server else self.pool.restart(spec)
        if len(self.pool.starts) > started:
            self.order.append({"server": spec.name, "role": role, "label": self.variants.label(role)})
        requests = self._requests_for(endpoint, measured.workload)
        speed = float(endpoint.provenance.get("clock_speed", 1.0))
        if not measured.provenance:
            measured.provenance.update(self._provenance(spec, endpoint, measured.workload))
        warm = self._warm_server(spec, endpoint, requests, measured.workload, speed)
        if not measured.results:
            measured.server_warmup = warm
        self._check_warmed(measured, endpoint, warm)
        if measured.server_death:
            return False
        self._repeat(measured, endpoint, requests, speed)
        last = measured.results[-1]
        return not (last.partial or not last.completed or measured.server_death)

    def extend(self, measured: MeasuredRun, why: str = "inconclusive") -> bool:
        """Auto repetitions, paired: one more block of OLD and NEW, `why` said in the log."""
        old = self.against.get((measured.server, measured.workload))
        if old is None or not self._can_extend(measured):
            return False
        if any(r.partial or not r.completed for r in old.results) or old.server_death:
            return False
        started = self.clock()
        self.log(
            f"{measured.server.name} @ concurrency {measured.concurrency}: {why}, paired block "
            f"{len(measured.results) + 1} of at most {self.options.max_repetitions}"
        )
        try:
            self._block(old, measured)
        finally:
            self.added_seconds += self.clock() - started
        self._stop_if_interrupted(measured)
        self._stop_if_interrupted(old)
        return True

    # -- judging -----------------------------------------------------------------

    def _old(self, run: MeasuredRun) -> MeasuredRun:
        old = self.against.get((run.server, run.workload))
        if old is None:
            raise RuntimeError(f"{run.server.name} @ concurrency {run.concurrency}: no OLD run beside it")
        return old

    def paired_entry(self, run: MeasuredRun, base: MeasuredRun | None = None) -> dict[str, Any]:
        """OLD's runs of `run`'s server and workload as a baseline entry (store.py's shape):
        each metric's per-repetition samples and their median, the speedup over OLD's base
        run for a speedup gate, OLD's first repetition's request and output lines, its provenance."""
        old = self._old(run)
        sides = dict(old.samples)
        if base is not None:
            sides["mtp_speedup"] = old.speedup_samples(self._old(base))
        metrics = {name: m for name, values in sides.items() if (m := _metric_entry(values)) is not None}
        entry: dict[str, Any] = {
            "workload": self.workload_identity(old),
            "provenance": dict(old.provenance),
            "metrics": metrics,
        }
        if old.rows:
            entry["requests"] = encode_rows(old.rows)
        if old.results:  # for the early-stop check and the output canary (report/crosscheck.py)
            entry["outputs"] = encode_outputs(output_rows(old.results[0].records))
        return entry

    def _gate_entry(
        self, run: MeasuredRun, base: MeasuredRun | None, *, record: GateRecord, **_: Any
    ) -> Mapping[str, Any] | None:
        """The entry `run` is judged against: OLD's runs (paired_entry), not a stored one."""
        record.baseline_path = f"{self.variants.label(OLD)} (paired)"
        return self.paired_entry(run, base)

    def _refresh_entry(
        self, entry: Mapping[str, Any] | None, run: MeasuredRun, base: MeasuredRun | None
    ) -> Mapping[str, Any] | None:
        return self.paired_entry(run, base)  # the blocks auto added ran OLD too

    def _base_entry(self, base: MeasuredRun, target: str) -> Mapping[str, Any] | None:
        return self.paired_entry(base)

    def _append_history(self, *args: Any, **kwargs: Any) -> None:
        """A paired run appends no history: its verdicts are NEW against OLD on this box
        tonight, not a night of one image against the baselines the history follows, and
        the baselines folder stays untouched (docs/history.md)."""

    def _spread_pools(self, target: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """The between-start spread pooled over this session's other paired cells at this
        concurrency (OLD's and NEW's repetitions of the other servers and workloads, each
        side a cell) and over every entry the target's baseline folder holds at it, this
        server's own included (its repetitions were other starts on this box, independent
        of tonight's): two blocks give a side one degree of freedom, and the spread's
        estimate from them alone left an unchanged image inconclusive one time in five
        (docs/verdicts.md). The stored baselines' values are not judged against."""
        cells: list[Mapping[str, list[float | None]]] = []
        for key, new in self.runs.items():
            if key == (run.server, run.workload) or new.concurrency != run.concurrency:
                continue
            cells.append(new.samples)
            if key in self.against:
                cells.append(self.against[key].samples)
        return spread_pools([*cells, *self.stored_cells(target, run, own=True)], names)

    def _gate_title(self, run: MeasuredRun, record: GateRecord, target: str) -> str:
        blocks = len(run.results)
        return (
            f"{run.server.name} @ concurrency {run.concurrency}: {self.variants.label(NEW)} vs "
            f"{self.variants.label(OLD)} (paired, {blocks} block{'s' * (blocks != 1)}) [{target}]"
        )

    def _gate_invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        reason = super()._gate_invalid(run, base, budget)
        if reason:
            return f"{self.variants.label(NEW)}: {reason}"
        for mine in (run, base):
            if mine is None:
                continue
            why = self.invalid_reason(self._old(mine), budget)
            if why:
                return f"{self.variants.label(OLD)} (what NEW is judged against): {why}"
        return None

    def update_command(self, nodeid: str) -> str:
        """Accepting NEW's level means recording NEW as the baselines (not in paired mode)."""
        command = super().update_command(nodeid)
        flag = self.variants.new_flag()
        return command.replace(" --update-baselines", f" {flag} --update-baselines") if flag else command
