"""GPU slots and the scheduling plan of a session spread over GPUs (--llmperf-gpus, -n).
The GPUs are cut into slots as wide as the largest server needs; each model's group of
servers (a speedup compares runs on the same GPUs) goes whole to one slot, heaviest first
onto the least loaded. Under xdist each slot is one xdist group. A plain value: every
process that collected the same tests computes the same plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_llmperf.servers.spec import ServerSpec

# vLLM's flags whose product is the GPUs one server uses (vllm/engine/arg_utils.py).
PARALLEL_FLAGS = {
    "--tensor-parallel-size": "tensor",
    "-tp": "tensor",
    "--pipeline-parallel-size": "pipeline",
    "-pp": "pipeline",
    "--data-parallel-size": "data",
    "-dp": "data",
}


class PlanError(ValueError):
    """The GPUs cannot hold the suite; the message lists what each server needs and what is there."""


class PlannedTestLike(Protocol):
    """What the plan reads of a collected test (session.PlannedTest has it)."""

    @property
    def nodeid(self) -> str: ...

    @property
    def servers(self) -> tuple[ServerSpec, ...]: ...

    @property
    def workloads(self) -> tuple[Any, ...]: ...


def gpu_need(spec: ServerSpec) -> int:
    """The GPUs `spec`'s server uses: its `gpus=`, else the product of its parallel sizes."""
    if spec.gpus is not None:
        return spec.gpus
    sizes = {"tensor": 1, "pipeline": 1, "data": 1}
    args = list(spec.args)
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        if flag not in PARALLEL_FLAGS:
            continue
        value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
        try:
            size = int(value)
        except ValueError:
            size = 0
        if size < 1:
            raise PlanError(
                f"server {spec.name}: {flag} needs a whole number >= 1, got {value!r}; fix its args, or give "
                "the GPUs it uses as ServerSpec(gpus=N)"
            )
        sizes[PARALLEL_FLAGS[flag]] = size
    return sizes["tensor"] * sizes["pipeline"] * sizes["data"]


@dataclass(frozen=True)
class Group:
    """Servers that share a slot, in the order they first run."""

    servers: tuple[ServerSpec, ...]
    tests: int
    runs: int  # measured runs (server x workload) its tests ask for, where collection can tell
    starts: tuple[int, int]  # expected container/process starts: (fewest, most)

    @property
    def need(self) -> int:
        return max(gpu_need(spec) for spec in self.servers)

    @property
    def label(self) -> str:
        models = list(dict.fromkeys(spec.model for spec in self.servers))
        return ", ".join(models)


@dataclass(frozen=True)
class Slot:
    index: int
    gpus: tuple[str, ...]
    groups: tuple[Group, ...]

    @property
    def group_name(self) -> str:
        """The xdist group of the slot's tests: `llmperf-gpus-0,1`."""
        return f"llmperf-gpus-{','.join(self.gpus)}"

    @property
    def where(self) -> str:
        return f"GPUs {','.join(self.gpus)}"

    @property
    def starts(self) -> tuple[int, int]:
        return (sum(g.starts[0] for g in self.groups), sum(g.starts[1] for g in self.groups))


@dataclass(frozen=True)
class Plan:
    gpus: tuple[str, ...]
    width: int  # GPUs per slot
    workers: int  # processes that run tests (xdist workers, or 1)
    slots: tuple[Slot, ...]  # the slots that run something, then the empty ones

    def slot_of(self, server: str) -> Slot | None:
        for slot in self.slots:
            if any(spec.name == server for group in slot.groups for spec in group.servers):
                return slot
        return None

    def gpus_by_server(self) -> dict[str, tuple[str, ...]]:
        return {spec.name: slot.gpus for slot in self.slots for group in slot.groups for spec in group.servers}

    @property
    def unused_gpus(self) -> tuple[str, ...]:
        """GPUs no slot holds."""
        used = {gpu for slot in self.slots for gpu in slot.gpus}
        return tuple(gpu for gpu in self.gpus if gpu not in used)

    def lines(self) -> list[str]:
        """The plan as the session prints it before anything starts."""
        busy = [slot for slot in self.slots if slot.groups]
        low, high = (sum(slot.starts[0] for slot in busy), sum(slot.starts[1] for slot in busy))
        starts = f"{low}" if low == high else f"{low} to {high}"
        head = (
            f"plan: GPUs {','.join(self.gpus)} in {len(self.slots)} slot(s) of {self.width} GPU(s), "
            f"{self.workers} worker(s); {sum(len(s.groups) for s in busy)} group(s) on {len(busy)} slot(s), "
            f"{starts} server start(s) in all"
        )
        lines = [head]
        for slot in busy:
            low, high = slot.starts
            starts = f"{low}" if low == high else f"{low}-{high}"
            lines.append(f"  slot {slot.index} ({slot.where}): {starts} start(s), in this order:")
            step = 0
            for group in slot.groups:
                for spec in group.servers:
                    step += 1
                    lines.append(f"    {step}. {spec.name} ({gpu_need(spec)} GPU(s))")
                lines.append(f"       ({group.label}: {group.tests} test(s), {group.runs} run(s), one slot)")
        if self.unused_gpus:
            lines.append(f"  GPUs {','.join(self.unused_gpus)} unused: {self._why_unused()}")
        idle = [slot for slot in self.slots if not slot.groups]
        if idle:
            lines.append(
                f"  {len(idle)} slot(s) idle ({'; '.join(slot.where for slot in idle)}): the suite has "
                f"{len(busy)} group(s), and a model's servers share one slot"
            )
        return lines

    def _why_unused(self) -> str:
        fits = len(self.gpus) // self.width
        if self.workers < fits:
            return f"{self.workers} worker(s) own {self.workers} slot(s) of {fits}: run with -n {fits} to use them"
        return f"slots are {self.width} GPU(s) wide (the largest server's need)"


def groups_of(
    tests: Sequence[PlannedTestLike], repetitions: int | str, max_repetitions: int, same_server: bool
) -> list[Group]:
    """The tests' servers grouped by model (a test naming two servers joins their models),
    in the order the tests run, with the starts each group's runs make."""
    parent: dict[str, str] = {}

    def find(model: str) -> str:
        while parent.setdefault(model, model) != model:
            model = parent[model]
        return model

    for test in tests:
        models = [spec.model for spec in test.servers]
        for other in models[1:]:
            parent[find(other)] = find(models[0])
        for model in models:
            find(model)
    members: dict[str, list[PlannedTestLike]] = {}
    for test in tests:
        if test.servers:
            members.setdefault(find(test.servers[0].model), []).append(test)
    groups = []
    for group_tests in members.values():
        servers = list(dict.fromkeys(spec for test in group_tests for spec in test.servers))
        runs, low, high = _starts(group_tests, repetitions, max_repetitions, same_server)
        groups.append(Group(tuple(servers), len(group_tests), runs, (low, high)))
    return groups


def _starts(
    tests: Iterable[PlannedTestLike], repetitions: int | str, max_repetitions: int, same_server: bool
) -> tuple[int, int, int]:
    """Measured runs, and the server starts they make (fewest, most): a start whenever another
    server ran last, and per repetition unless --llmperf-same-server."""
    done: set[tuple[str, Any]] = set()
    current: str | None = None
    runs = switches = 0
    for test in tests:
        for spec in test.servers:
            for workload in test.workloads or (None,):
                key = (spec.name, workload)
                if key in done:
                    continue
                done.add(key)
                runs += 1
                if current != spec.name:
                    switches += 1
                    current = spec.name
    if same_server:
        return runs, switches, switches
    fewest = 1 if repetitions == "auto" else int(repetitions)
    most = max_repetitions if repetitions == "auto" else int(repetitions)
    return runs, switches + runs * (fewest - 1), switches + runs * (most - 1)


def spread(groups: Sequence[Group], count: int) -> list[list[Group]]:
    """`groups` over `count` bins (a plan's slots, --llmperf-shard's shards): the heaviest
    group (most runs, then most starts) first onto the least loaded bin; ties go by the
    groups' order, then to the lower bin. Each bin's groups in the groups' order."""
    loads = [(0, 0)] * count  # (runs, starts) given to each bin so far
    given: list[list[int]] = [[] for _ in range(count)]
    for i, group in sorted(enumerate(groups), key=lambda item: (-item[1].runs, -item[1].starts[0], item[0])):
        target = min(range(count), key=lambda b: (loads[b], b))
        given[target].append(i)
        loads[target] = (loads[target][0] + group.runs, loads[target][1] + group.starts[0])
    return [[groups[i] for i in sorted(held)] for held in given]


def make_plan(
    tests: Sequence[PlannedTestLike],
    gpus: Sequence[str],
    workers: int,
    *,
    repetitions: int | str = 1,
    max_repetitions: int = 5,
    same_server: bool = False,
) -> Plan:
    """Slots over `gpus` for `workers` processes, and each group of `tests` on one slot.
    PlanError when the GPUs cannot hold the largest server."""
    if not gpus:
        raise PlanError("no GPUs given: --llmperf-gpus 0,1,2,3 (or all)")
    if workers < 1:
        raise PlanError(f"the plan needs at least one worker, got {workers}")
    groups = groups_of(tests, repetitions, max_repetitions, same_server)
    width = max((group.need for group in groups), default=1)
    if width > len(gpus):
        needs = "; ".join(f"{spec.name} {gpu_need(spec)}" for group in groups for spec in group.servers)
        raise PlanError(
            f"the GPUs cannot hold the largest server: it needs {width} GPU(s), --llmperf-gpus gives "
            f"{len(gpus)} ({','.join(gpus)}). GPUs each server needs: {needs}. Give more GPUs, or lower "
            "the server's --tensor-parallel-size (or gpus=)"
        )
    count = min(workers, len(gpus) // width)
    given = spread(groups, count)
    slots = tuple(Slot(i, tuple(gpus[i * width : (i + 1) * width]), tuple(given[i])) for i in range(count))
    return Plan(tuple(gpus), width, workers, slots)
