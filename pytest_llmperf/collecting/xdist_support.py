"""pytest-xdist support: -n's rules per target, the GPU-slot scheduler, the plan and report
documents workers send the controller. `XdistHooks` is registered only with xdist."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

WORKER_REPORTS_KEY = pytest.StashKey["dict[str, dict[str, Any] | None]"]()
WORKEROUTPUT_KEY = "llmperf_report"  # the worker's document as JSON text in config.workeroutput
END_OUTPUT_KEY = "llmperf_end"  # what the worker's session end wrote and found (lines, as JSON)
WORKER_END_KEY = pytest.StashKey["dict[str, list[str]]"]()
PLAN_SHOWN_KEY = pytest.StashKey[bool]()  # xdist controller: the plan a worker sent is printed once
# --llmperf-shard: this process's shard holds none of the collected tests (a worker says so
# in its workeroutput), so "no tests collected" is not a failure.
EMPTY_SHARD_KEY = pytest.StashKey[bool]()
EMPTY_SHARD_OUTPUT = "llmperf_empty_shard"
# --dist loadgroup: the group the plugin gives a test (its model's, or its GPU slot's), and the
# workerinput key naming the folder where each worker writes its tests' groups for the controller.
GROUP_KEY = pytest.StashKey[str]()
GROUPS_DIR_INPUT = "llmperf_groups_dir"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    return not is_worker(config) and config.pluginmanager.hasplugin("dsession")


def mark_empty_shard(config: pytest.Config) -> None:
    config.stash[EMPTY_SHARD_KEY] = True
    if is_worker(config):
        config.workeroutput[EMPTY_SHARD_OUTPUT] = True  # type: ignore[attr-defined]  # xdist sets it on workers


def empty_shard(config: pytest.Config) -> bool:
    """--llmperf-shard: this session's shard held none of the collected tests (a worker's, on the controller)."""
    return config.stash.get(EMPTY_SHARD_KEY, False)


def loadgroup(config: pytest.Config) -> bool:
    option = config.option
    return bool(getattr(option, "loadgroup", False) or getattr(option, "dist", None) == "loadgroup")


def plain_nodeid(item: pytest.Item) -> str:
    """The test's id as a command line takes it: before pytest 9.2, --dist loadgroup appends
    "@<group>" to a test the user marked `xdist_group`."""
    marker = item.get_closest_marker("xdist_group")
    group = (marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
    suffix = f"@{group}" if group else ""
    return item.nodeid.removesuffix(suffix) if suffix else item.nodeid


def check_numprocesses(config: pytest.Config, options: Any) -> None:
    """-n with this target: its kind's xdist rule, GPU slots enough for the workers, and
    --dist loadgroup (a server's tests stay on one worker); a usage error otherwise."""
    numprocesses = getattr(config.option, "numprocesses", None)
    if not numprocesses or options.target is None:
        return
    rule = options.target_kind.xdist
    if rule == "gpu-slots" and options.gpus is None:
        raise pytest.UsageError(
            "pytest-llmperf: -n/--numprocesses would start several vLLM servers at once on one GPU; "
            "give each worker GPUs of its own with --llmperf-gpus 0,1,2,3 (or all), or run without -n"
        )
    if rule == "never":
        raise pytest.UsageError(
            "pytest-llmperf: -n/--numprocesses would start several vLLM processes at once on the GPUs "
            f"CUDA_VISIBLE_DEVICES names; run {options.target_kind.flag} without -n (containers spread over GPUs "
            "with --llmperf-gpu --llmperf-gpus)"
        )
    if options.gpus is not None and int(numprocesses) > len(options.gpus):
        raise pytest.UsageError(
            f"pytest-llmperf: -n {numprocesses} workers, but --llmperf-gpus gives {len(options.gpus)} GPU(s) "
            f"({','.join(options.gpus)}); each worker owns a slot of at least one GPU: use "
            f"-n {len(options.gpus)} or fewer"
        )
    if getattr(config.option, "dist", None) != "loadgroup":
        raise pytest.UsageError(
            "pytest-llmperf: with -n, add --dist loadgroup so each server's tests stay on one worker "
            "(the plugin groups them by model)"
        )


def send_plan(config: pytest.Config, report: pytest.TestReport, plan: Any) -> None:
    """A worker's plan rides on its first report (xdist carries report attributes): the
    controller, which collected nothing, prints it once (`WorkersPlan`)."""
    if not config.stash.get(PLAN_SHOWN_KEY, False):
        report.llmperf_plan = plan.lines()  # type: ignore[attr-defined]  # xdist carries report attributes
        config.stash[PLAN_SHOWN_KEY] = True


def item_group(item: pytest.Item) -> str | None:
    """The xdist group of a test under --dist loadgroup: the plugin's (a model's, or a GPU
    slot's) and any `xdist_group` marks of the user's, joined as xdist joins them."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    ours = item.stash.get(GROUP_KEY, None)
    if ours is not None:
        names.add(ours)
    return "_".join(sorted(names)) or None


def write_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A worker's side of the group channel: each collected test's group, by the node id
    the controller will schedule, in the folder the controller named in the workerinput."""
    folder = getattr(config, "workerinput", {}).get(GROUPS_DIR_INPUT)
    if folder is None:
        return
    groups = {item.nodeid: group for item in items if (group := item_group(item)) is not None}
    path = Path(folder) / f"{config.workerinput['workerid']}.json"  # type: ignore[attr-defined]  # xdist sets it
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps(groups))
    partial.replace(path)


def read_groups(folder: str) -> dict[str, str]:
    """The controller's side: every worker's groups (they collected the same tests)."""
    groups: dict[str, str] = {}
    for path in sorted(Path(folder).glob("*.json")):
        groups.update(json.loads(path.read_text()))
    return groups


def is_slot_scope(scope: str) -> bool:
    return scope.startswith("llmperf-") and ("gpus-" in scope)


def group_scheduling() -> Any:
    """--dist loadgroup as the plugin schedules it: a group's tests go to one worker, the
    groups read from what the workers wrote, not from their node ids (pytest 9.2 no longer
    lets xdist append "@group" to them); and a worker holding a GPU slot's group gets no
    second slot while a worker without one could take it."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no stubs for it
        def __init__(self, config: Any, log: Any, groups: Callable[[], dict[str, str]]) -> None:
            super().__init__(config, log)
            self._read_groups = groups
            self._groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # first asked once every worker has collected
                self._groups = self._read_groups()
            return self._groups.get(nodeid, nodeid)

        def _holds_slot(self, node: Any) -> bool:
            return any(is_slot_scope(scope) for scope in self.assigned_work.get(node, {}))

        def _assign_work_unit(self, node: Any) -> None:
            if self._holds_slot(node):
                other = next((scope for scope in self.workqueue if not is_slot_scope(scope)), None)
                if other is not None:  # a test of no slot: any worker may run it
                    self.workqueue.move_to_end(other, last=False)
                elif any(n is not node and not n.shutting_down and not self._holds_slot(n) for n in self.assigned_work):
                    return  # only slots left, and a worker without one will take the next
            super()._assign_work_unit(node)

    return GroupScheduling


class XdistHooks:
    """Registered only with xdist. The controller's side: the group scheduler under --dist
    loadgroup, fed by the workers' groups, and each worker's report document kept as the
    worker goes down. The worker's side: its groups written once collection is done."""

    def __init__(self, options: Any) -> None:
        self.options = options
        self.groups_dir: str | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.groups_dir is None:
            self.groups_dir = tempfile.mkdtemp(prefix="llmperf-xdist-groups-")
        node.workerinput[GROUPS_DIR_INPUT] = self.groups_dir

    @pytest.hookimpl(tryfirst=True)  # before xdist's own hook sends the collection to the controller
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        write_groups(session.config, session.items)

    @pytest.hookimpl(tryfirst=True, optionalhook=True)  # firstresult: before xdist's own loadgroup
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if not loadgroup(config):
            return None
        folder = self.groups_dir
        return group_scheduling()(config, log, lambda: read_groups(folder) if folder is not None else {})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.groups_dir is not None:
            shutil.rmtree(self.groups_dir, ignore_errors=True)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Keep the report document (and the session end's lines) a worker sent in its workeroutput. A worker that went
        down with an error and no document is remembered as lost."""
        reports = node.config.stash.setdefault(WORKER_REPORTS_KEY, {})
        worker = str(node.workerinput["workerid"])
        text = (getattr(node, "workeroutput", None) or {}).get(WORKEROUTPUT_KEY)
        end = (getattr(node, "workeroutput", None) or {}).get(END_OUTPUT_KEY)
        if end is not None:
            node.config.stash.setdefault(WORKER_END_KEY, {})[worker] = json.loads(end)
        if (getattr(node, "workeroutput", None) or {}).get(EMPTY_SHARD_OUTPUT):
            node.config.stash[EMPTY_SHARD_KEY] = True
        if text is not None:
            reports[worker] = json.loads(text)
        elif error is not None and reports.get(worker) is None:
            reports[worker] = None  # no runs from it; the summary says so


class WorkersPlan:
    """xdist controller with --llmperf-gpus: it collects nothing, so it prints the plan a
    worker sent with its first report (every worker makes the same one), once."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        lines = getattr(report, "llmperf_plan", None)
        if not lines or self.config.stash.get(PLAN_SHOWN_KEY, False):
            return
        self.config.stash[PLAN_SHOWN_KEY] = True
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            for line in lines:
                reporter.write_line(f"[llmperf] {line}")
