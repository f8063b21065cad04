"""--llmperf-gpus through Docker: `-n 4 --llmperf-gpus 0,1,2,3` over four fake one-GPU
slots in containers of the local sim image, a GPU container's device request as the
engine stores it, and the engine of DOCKER_HOST dying mid-run.

This engine has no NVIDIA runtime: a container with a GPU device request is created (and
inspected) but cannot start. So the four-worker run uses `--llmperf-docker`, where the
slot is the container's `io.pytest-llmperf.gpus` label and its provenance; the device
request of a slot is checked on a `--llmperf-gpu` create, read back with docker inspect."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.spec import ServerSpec
from tests.docker.images import write_tiny_sharegpt

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CONFTEST = """
from pytest_llmperf import ServerSpec

MTP = {{"method": "mtp", "num_speculative_tokens": 3}}
ARGS = ("--max-num-seqs", "8", "--sim-speed", "4")
BASES = [ServerSpec(name=n, model=f"org/{{n}}", image="{image}", args=ARGS) for n in ("m1", "m2", "m3", "m4")]
SERVERS = [s for b in BASES for s in (b, b.with_speculative(MTP, name=f"{{b.name}}-mtp"))]


def pytest_llmperf_servers():
    return SERVERS
"""

# Each base and MTP test inspects its own container while it runs (docker inspect: labels
# and device requests) and leaves what it saw in inspected/<test>.json.
SUITE = """
import json, os, pathlib
import docker
import pytest

W = dict(num_prompts=6, max_tokens=16, warmup=1)
NAMES = ["m1", "m2", "m3", "m4"]
OUT = pathlib.Path(__file__).parent / "inspected"


def on(server, base=None):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, **W), id=server)


def inspect(name, run):
    attrs = docker.from_env().api.inspect_container(run.provenance["container"])
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps({
        "server": name,
        "worker": os.environ.get("PYTEST_XDIST_WORKER"),
        "labels": attrs["Config"]["Labels"],
        "device_requests": attrs["HostConfig"]["DeviceRequests"],
        "gpu_ids": run.provenance.get("gpu_ids"),
    }))


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n) for n in NAMES])
def test_base(llmperf, server, concurrency):
    inspect(server, llmperf.run(concurrency=concurrency))


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp") for n in NAMES])
def test_mtp(llmperf, server, concurrency):
    inspect(server, llmperf.run(concurrency=concurrency))


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp", base=n) for n in NAMES])
def test_speedup(llmperf, server, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    base = llmperf.run(concurrency=concurrency, server=llmperf.base)
    assert mtp.results and base.results  # both cached on this worker: its slot ran both
"""


def test_four_workers_run_four_slots_in_containers_each_labelled_with_its_slot(
    pytester, sim_image, containers_of, monkeypatch, tmp_path_factory
):
    pytest.importorskip("xdist")
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    write_tiny_sharegpt(pytester.path / "sharegpt.json")
    pytester.makeconftest(CONFTEST.format(image=sim_image))
    pytester.makepyfile(test_fleet=SUITE)
    pytester.makeini("[pytest]\nllmperf_dataset = sharegpt.json\nllmperf_repetitions = 1\nllmperf_server_warmup = 4\n")
    before = {c.id for c in containers_of("")}

    result = pytester.runpytest_subprocess(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker", "-n", "4", "--dist", "loadgroup",
        "--llmperf-gpus", "0,1,2,3", "--llmperf-report", "report.json", "-v",
    )  # fmt: skip
    result.assert_outcomes(passed=12)
    out = result.stdout.str()
    assert out.index("plan: GPUs 0,1,2,3 in 4 slot(s) of 1 GPU(s), 4 worker(s)") < out.index("llmperf summary")
    assert "scheduling tests via GroupScheduling" in out

    seen = {p.stem: json.loads(p.read_text()) for p in (pytester.path / "inspected").glob("*.json")}
    assert sorted(seen) == sorted([f"m{i}" for i in range(1, 5)] + [f"m{i}-mtp" for i in range(1, 5)])
    slot_of = {name: info["labels"][lo.LABEL_GPUS] for name, info in seen.items()}
    for name, info in seen.items():
        assert info["device_requests"] in (None, [])  # --llmperf-docker: no GPU asked
        assert info["gpu_ids"] == [slot_of[name]]
        assert slot_of[name] == slot_of[name.removesuffix("-mtp")]  # base and MTP on one slot
    models = {name: slot for name, slot in slot_of.items() if not name.endswith("-mtp")}
    assert sorted(models.values()) == ["0", "1", "2", "3"]  # four models, four slots, none shared
    workers = {seen[name]["worker"] for name in models}
    assert len(workers) == 4  # each slot on a worker of its own
    assert all(seen[f"{m}-mtp"]["worker"] == seen[m]["worker"] for m in models)

    report = json.loads((pytester.path / "report.json").read_text())
    assert sorted(r["server"]["name"] for r in report["runs"]) == sorted(seen)  # every worker's runs
    assert sorted(report["workers"]) == ["gw0", "gw1", "gw2", "gw3"]
    assert len(re.findall(r"PASSED test_fleet.py::test_\w+\[m\d(?:-mtp)?-2\]", out)) == 12
    assert {c.id for c in containers_of("")} == before  # nothing of ours left running


class _InspectingContainers:
    """The engine's containers API, reading back each container it creates (docker inspect)."""

    def __init__(self, client: Any, seen: list[dict[str, Any]]) -> None:
        self._client, self._seen = client, seen

    def create(self, *args: Any, **kwargs: Any) -> Any:
        container = self._client.containers.create(*args, **kwargs)
        attrs = self._client.api.inspect_container(container.id)
        self._seen.append({"labels": attrs["Config"]["Labels"], "requests": attrs["HostConfig"]["DeviceRequests"]})
        return container

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client.containers, name)


class _InspectingClient:
    def __init__(self, client: Any, seen: list[dict[str, Any]]) -> None:
        self._client = client
        self.containers = _InspectingContainers(client, seen)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_gpu_containers_device_request_names_its_slot_and_this_engine_refuses_it_clearly(
    make_target, docker_client, test_session_id, containers_of
):
    seen: list[dict[str, Any]] = []
    spec = ServerSpec(name="slotted", model="org/slotted", args=("--sim-speed", "50"))
    target = make_target(client=_InspectingClient(docker_client, seen), gpu=True, gpu_slots={"slotted": ["2", "3"]})
    with pytest.raises(ServerStartError) as info:
        with target.start(spec):
            pass
    (created,) = seen
    (request,) = created["requests"]
    assert request["DeviceIDs"] == ["2", "3"] and request["Capabilities"] == [["gpu"]]
    assert created["labels"][lo.LABEL_GPUS] == "2,3" and created["labels"][lo.LABEL_GPU] == "1"
    assert "NVIDIA Container Toolkit" in str(info.value)  # no GPU runtime on this engine: said, with the fix
    assert containers_of(test_session_id) == []  # removed on the way out


KILLED_SUITE = """
import pytest

W = dict(num_prompts=24, max_tokens=64, warmup=1)
NAMES = ["m1"]


def on(server):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, **W), id=server)


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n) for n in NAMES])
def test_base(llmperf, server, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp") for n in NAMES])
def test_mtp(llmperf, server, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def test_an_engine_killed_mid_run_fails_its_run_and_the_next_start_with_the_reason(
    pytester, sim_image, docker_client, containers_of, monkeypatch, tmp_path_factory
):
    """DOCKER_HOST is this engine behind a socket forwarder (a remote box's engine). Two
    seconds after the first of m1's servers answers, the forwarder and that container are
    killed (the box died): that run is invalid (its engine does not answer about the
    container), the other server's start fails naming DOCKER_HOST, and the one container
    left is the killed one (what --llmperf-cleanup on that box is for)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    write_tiny_sharegpt(pytester.path / "sharegpt.json")
    pytester.makeconftest(CONFTEST.format(image=sim_image).replace('"--sim-speed", "4"', '"--sim-speed", "1"'))
    pytester.makepyfile(test_killed=KILLED_SUITE)
    pytester.makeini(
        "[pytest]\nllmperf_dataset = sharegpt.json\nllmperf_repetitions = 1\nllmperf_server_warmup = 2\n"
        "llmperf_tolerances =\n    decode_tok_s = 90%\n"
    )
    sock = tmp_path_factory.mktemp("box") / "docker.sock"
    proxy = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("socket_proxy.py")), str(sock), "/var/run/docker.sock"],
        stdout=subprocess.PIPE,
        text=True,
    )
    before = {c.id for c in containers_of("")}
    try:
        assert proxy.stdout is not None and proxy.stdout.readline().strip() == "ready"
        args = ["-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker", "--update-baselines", "-v", "-rf"]
        run = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # COLUMNS: the short summary's reasons whole
            env={**os.environ, "DOCKER_HOST": f"unix://{sock}", "COLUMNS": "1000"},
        )
        deadline = time.monotonic() + 120
        doomed = []
        while time.monotonic() < deadline and not doomed:
            doomed = docker_client.containers.list(filters={"label": [f"{lo.LABEL_MODEL}=org/m1"], "status": "running"})
            time.sleep(0.2)
        assert doomed, "m1's container never ran"
        doomed[0].reload()
        port = doomed[0].attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"]
        while time.monotonic() < deadline and not _answers(f"http://127.0.0.1:{port}/v1/models"):
            time.sleep(0.2)
        time.sleep(2.0)  # ready: its server is warming up or measuring (24 requests, ~10 s)
        proxy.kill()
        doomed[0].kill()
        out, _ = run.communicate(timeout=300)
    finally:
        proxy.kill()
        proxy.wait()
    left = [c for c in containers_of("") if c.id not in before]
    for c in left:
        c.remove(force=True, v=True)
    failed = dict(re.findall(r"^FAILED test_killed.py::test_\w+\[(m1(?:-mtp)?)-2\]\S* - (.*)$", out, re.M))
    assert sorted(failed) == ["m1", "m1-mtp"], out
    assert any("answer" in why or "died" in why for why in failed.values()), failed  # the run: the engine went
    assert f"unix://{sock}" in out and "Check that host is up and its engine answers" in out, out
    assert [c.id for c in left] == [doomed[0].id]  # the killed one, for --llmperf-cleanup on that box
