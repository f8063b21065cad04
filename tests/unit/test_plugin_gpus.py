"""--llmperf-gpus end to end on the simulator: the plan printed before anything starts
(and alone under --llmperf-plan), the refusals before any server starts, and -n 4 over
four fake one-GPU slots: each model's base and MTP on one slot and one worker, no slot
shared, every run and verdict in the controller's one summary and report."""

from __future__ import annotations

import json
import re
import types

import pytest

from tests.plugin_project import make_project

FLEET_CONFTEST = """
from pytest_llmperf import ServerSpec

MTP = {"method": "mtp", "num_speculative_tokens": 3}
BASES = [ServerSpec(name=n, model=f"org/{n}", args=("--max-num-seqs", "8")) for n in ("m1", "m2", "m3", "m4")]
SERVERS = [s for b in BASES for s in (b, b.with_speculative(MTP, name=f"{b.name}-mtp"))]
SERVERS.append(ServerSpec(name="wide", model="org/wide", args=("--tensor-parallel-size", "4")))


def pytest_llmperf_servers():
    return SERVERS
"""

# Not gated: four simulated servers and four measuring clients at once on a small shared
# machine read `invalid` (client lag), which is the load, not the placement tested here.
# The verdicts' merge across workers is test_plugin.py's.
FLEET_SUITE = """
import pytest

W = dict(num_prompts=6, max_tokens=16, warmup=1)
NAMES = ["m1", "m2", "m3", "m4"]


def on(server, base=None):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, **W), id=server)


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n) for n in NAMES])
def test_base(llmperf, server, concurrency):
    assert llmperf.run(concurrency=concurrency).results


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp") for n in NAMES])
def test_mtp(llmperf, server, concurrency):
    assert llmperf.run(concurrency=concurrency).results


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp", base=n) for n in NAMES])
def test_speedup(llmperf, server, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    assert mtp.results and base.results  # both cached on this worker: its slot ran both
"""

WIDE_SUITE = """
import pytest

@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.llmperf(server="wide", num_prompts=6, max_tokens=16)
def test_wide(llmperf, concurrency):
    llmperf.run(concurrency=concurrency)
"""


@pytest.fixture
def fleet(pytester, monkeypatch, tmp_path_factory):
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.makeconftest(FLEET_CONFTEST)
    project.path.joinpath("test_suite.py").unlink()
    project.makepyfile(test_fleet=FLEET_SUITE)
    return project


def run(project, *args):
    return project.runpytest_subprocess(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--llmperf-sim", *args
    )


def test_the_plan_alone_prints_each_slot_and_starts_nothing(fleet):
    pytest.importorskip("xdist")
    result = run(fleet, "-n", "4", "--dist", "loadgroup", "--llmperf-gpus", "0,1,2,3", "--llmperf-plan")
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*plan: GPUs 0,1,2,3 in 4 slot(s) of 1 GPU(s), 4 worker(s); 4 group(s) on 4 slot(s), "
            "8 server start(s) in all",
            "*slot 0 (GPUs 0): 2 start(s), in this order:",
            "*1. m1 (1 GPU(s))",
            "*2. m1-mtp (1 GPU(s))",
            "*(org/m1: 3 test(s), 2 run(s), one slot)",
            "*slot 3 (GPUs 3): 2 start(s), in this order:",
            "*(org/m4: 3 test(s), 2 run(s), one slot)",
            "*--llmperf-plan: nothing started",
        ]
    )
    assert "starting server" not in out and "workers [" not in out  # no xdist worker, no server
    assert re.search(r"no tests ran|12 tests collected|collected 12 items", out)


def test_gpus_that_cannot_hold_the_largest_server_stop_before_any_start(fleet):
    fleet.makepyfile(test_wide=WIDE_SUITE)
    result = run(fleet, "--llmperf-gpus", "0,1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*the GPUs cannot hold the largest server: it needs 4 GPU(s), --llmperf-gpus gives 2 (0,1). "
            "GPUs each server needs: m1 1; m1-mtp 1;*wide 4. Give more GPUs*"
        ]
    )
    assert "starting server" not in result.stdout.str()


def test_under_xdist_a_worker_that_cannot_plan_says_why_on_the_controller_and_nothing_runs(fleet):
    """A worker's usage error would crash xdist's controller: it reaches it as a collection
    error, and every performance test is left out."""
    pytest.importorskip("xdist")
    fleet.makepyfile(test_wide=WIDE_SUITE)
    result = run(fleet, "-n", "2", "--dist", "loadgroup", "--llmperf-gpus", "0,1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test session*",
            "pytest-llmperf: the GPUs cannot hold the largest server: it needs 4 GPU(s)*",
        ]
    )
    out = result.stdout.str()
    assert "2 workers [0 items]" in out and "starting server" not in out and "passed" not in out


def test_more_workers_than_gpus_is_refused_at_once(fleet):
    pytest.importorskip("xdist")
    result = run(fleet, "-n", "3", "--dist", "loadgroup", "--llmperf-gpus", "0,1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*-n 3 workers, but --llmperf-gpus gives 2 GPU(s) (0,1)*use -n 2 or fewer*"])


@pytest.mark.slow  # four workers, eight simulated servers: about a minute here
def test_four_workers_on_four_slots_each_model_on_its_own_slot_one_summary_and_report(fleet):
    pytest.importorskip("xdist")
    report = fleet.path / "report.json"
    result = run(
        fleet, "-n", "4", "--dist", "loadgroup", "--llmperf-gpus", "0,1,2,3", "--llmperf-report", str(report), "-v",
    )  # fmt: skip
    out = result.stdout.str()
    result.assert_outcomes(passed=12)
    assert "scheduling tests via GroupScheduling" in out  # the plugin's scheduler: no worker gets two slots
    # The plan, printed on the controller before the first server was ready.
    plan_at = out.index("plan: GPUs 0,1,2,3 in 4 slot(s)")
    assert plan_at < out.index("llmperf summary")
    # Each slot's tests on one worker; four workers, four slots.
    ran = re.findall(r"\[(gw\d+)\].*PASSED \S+\[(m\d)(?:-mtp)?-2\]", out)
    assert len(ran) == 12
    data = json.loads(report.read_text())
    runs = {r["server"]["name"]: r for r in data["runs"]}
    slot_of_model = {name: r["provenance"]["gpu_ids"][0] for name, r in runs.items() if not name.endswith("-mtp")}
    assert sorted(slot_of_model.values()) == ["0", "1", "2", "3"]  # four models, four slots, none shared
    worker_of_slot = {slot_of_model[model]: worker for worker, model in ran}
    assert len({(worker, model) for worker, model in ran}) == 4  # each model's three tests on one worker
    assert len(set(worker_of_slot.values())) == 4  # no slot shared, no worker with two
    assert sorted(runs) == sorted([f"m{i}" for i in range(1, 5)] + [f"m{i}-mtp" for i in range(1, 5)])
    for name, r in runs.items():
        model = name.removesuffix("-mtp")
        assert r["provenance"]["gpu_ids"] == [slot_of_model[model]], name  # base and MTP on the model's slot
        assert r["worker"] == worker_of_slot[slot_of_model[model]]
    assert all(len(r["results"][0]["records"]) == 6 for r in runs.values())
    assert sorted(data["workers"]) == ["gw0", "gw1", "gw2", "gw3"] and data["lost_workers"] == []
    summary = out[out.index("llmperf summary") :]
    assert "servers started (one at a time on each of 4 xdist workers)" in summary
    for name in runs:
        assert re.search(rf"^{re.escape(name)}\s+2\s+6/6", summary, re.M), name


def test_a_remote_docker_host_with_a_loopback_publish_host_is_refused_before_anything_starts(fleet, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "ssh://ci@gpu-box")
    result = fleet.runpytest_subprocess("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*DOCKER_HOST='ssh://ci@gpu-box' is a remote engine: a port published on 127.0.0.1 there is not reachable*"
         "--llmperf-publish-host*"]
    )  # fmt: skip


class _Node:
    """A stand-in for xdist's WorkerController: what the scheduler sends it."""

    def __init__(self, name: str) -> None:
        self.name, self.shutting_down, self.sent = name, False, []
        self.gateway = types.SimpleNamespace(id=name)

    def send_runtest_some(self, indices):
        self.sent += indices

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self) -> str:
        return self.name


def test_the_slot_scheduler_never_gives_a_worker_a_second_slot_while_another_has_none():
    """xdist's loadgroup refills a worker that has two tests or fewer left with the next
    group, a GPU slot's too: a worker that runs its tests while the other is still busy
    would be handed both slots. The slot scheduler keeps the second slot for the worker
    without one. Driven here with gw0 running all it holds before gw1 runs any (xdist's
    first split of the queue differs between its releases; the rule must hold whichever)."""
    pytest.importorskip("xdist")
    from xdist.scheduler import LoadGroupScheduling

    from pytest_llmperf.collecting import xdist_support

    config = types.SimpleNamespace(
        getvalue=lambda name: ["popen", "popen"] if name == "tx" else None,
        option=types.SimpleNamespace(loadscopereorder=False),
    )
    groups = {"t.py::a": "llmperf-gpus-0", **{f"t.py::b{i}": "llmperf-gpus-1" for i in range(3)}}
    plain = ["t.py::u1", "t.py::u2", "t.py::u3", "t.py::u4"]

    def most_slots_held(sched, ids) -> tuple[int, list[int]]:
        nodes = (_Node("gw0"), _Node("gw1"))
        for node in nodes:
            sched.add_node(node)
            sched.add_node_collection(node, ids)
        sched.schedule()
        most = 0
        for _ in range(len(ids)):
            for node in nodes:
                while pending := [t for tests in sched.assigned_work[node].values() for t, d in tests.items() if not d]:
                    sched.mark_test_complete(node, ids.index(pending[0]))
                    held = [sum("gpus" in scope for scope in sched.assigned_work[n]) for n in nodes]
                    most = max(most, *held)
        return most, sorted(held)

    # xdist's own loadgroup (its "@group" node ids) hands gw0 both slots ...
    suffixed = plain + [f"{test}@{group}" for test, group in groups.items()]
    assert most_slots_held(LoadGroupScheduling(config, None), suffixed) == (2, [0, 2])
    # ... the plugin's scheduler one slot to each worker.
    ours = xdist_support.group_scheduling()(config, None, lambda: groups)
    assert most_slots_held(ours, plain + list(groups)) == (1, [1, 1])
