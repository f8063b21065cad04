"""DockerTarget without an engine: pure helpers, validation, the create call's shape
(the seeds' `docker run`), teardown and the SIGTERM handler, against a fake client."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.owners import Owner
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.servers.teardown import LiveContainers, remove_container
from pytest_llmperf.util.secrets import Secrets
from tests.session_fakes import FakeRunner

TOKEN = "hf_unit_SECRET_value_42"

SEED = ServerSpec(
    name="qwen3.6-27b-fp8",
    model="Qwen/Qwen3.6-27B-FP8",
    image="vllm/vllm-openai:cu130-nightly",
    args=("--max-model-len", "65536", "--gpu-memory-utilization", "0.85", "--max-num-seqs", "8"),
    env={"HF_TOKEN": None},
).with_speculative({"method": "mtp", "num_speculative_tokens": 3}, name="qwen3.6-27b-fp8-mtp")


# ---------------------------------------------------- environment (redaction: tests/unit/util/test_secrets.py)


def test_build_environment_passes_by_name_and_collects_secret_values():
    spec = ServerSpec(
        name="s", model="m", env={"HF_TOKEN": None, "MY_API_KEY": "k-123456", "UNSET_ONE": None, "PLAIN": "1"}
    )
    environ = {"HF_TOKEN": TOKEN, "OTHER": "not passed"}
    env, secrets, missing = dk.build_environment(spec, ("HF_TOKEN",), environ)
    assert dict(env) == {"HF_TOKEN": TOKEN, "MY_API_KEY": "k-123456", "PLAIN": "1"}
    assert set(secrets) == {TOKEN, "k-123456"}
    assert missing == ["UNSET_ONE"]


def test_the_api_key_flag_travels_in_the_environment_not_the_command():
    spec = ServerSpec(name="s", model="m", args=("--api-key", "k-123456", "--max-num-seqs", "4"))
    env, secrets, _ = dk.build_environment(spec, (), {})
    assert dict(env) == {"VLLM_API_KEY": "k-123456"} and "k-123456" in set(secrets)
    assert "k-123456" not in repr(env)


def test_the_api_key_flag_wins_over_a_vllm_api_key_from_the_environment_as_in_vllm():
    spec = ServerSpec(name="s", model="m", args=("--api-key", "k-flag-1234"), env={"VLLM_API_KEY": "k-env-1234"})
    env, _, _ = dk.build_environment(spec, ("VLLM_API_KEY",), {"VLLM_API_KEY": "k-passed-1234"})
    assert env["VLLM_API_KEY"] == "k-flag-1234"


def test_token_in_callers_environment_is_scrubbed_even_when_not_passed():
    spec = ServerSpec(name="s", model="m")
    env, secrets, _ = dk.build_environment(spec, (), {"HF_TOKEN": TOKEN})
    assert dict(env) == {} and list(secrets) == [TOKEN]


def test_a_passed_through_variable_with_a_secret_name_is_scrubbed():
    spec = ServerSpec(name="s", model="m")
    env, secrets, _ = dk.build_environment(
        spec, ("VLLM_API_KEY", "VLLM_LOGGING_LEVEL"), {"VLLM_API_KEY": "k-9876543", "VLLM_LOGGING_LEVEL": "DEBUG"}
    )
    assert dict(env) == {"VLLM_API_KEY": "k-9876543", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert list(secrets) == ["k-9876543"] and "k-9876543" not in repr(env)


# ----------------------------------------------------------------------------- remote engines


@pytest.mark.parametrize(
    "docker_host, publish, expected",
    [
        (None, "127.0.0.1", "127.0.0.1"),
        ("unix:///var/run/docker.sock", "127.0.0.1", "127.0.0.1"),
        (None, "0.0.0.0", "127.0.0.1"),
        ("tcp://127.0.0.1:2375", "127.0.0.1", "127.0.0.1"),
        ("tcp://gpu-box.lab:2376", "0.0.0.0", "gpu-box.lab"),
        ("ssh://ops@gpu-box.lab", "0.0.0.0", "gpu-box.lab"),
        ("ssh://ops@gpu-box.lab", "10.1.2.3", "10.1.2.3"),
    ],
)
def test_endpoint_host(docker_host, publish, expected):
    assert dk.endpoint_host(docker_host, publish) == expected


def test_remote_engine_with_loopback_publish_is_a_clear_error():
    with pytest.raises(ValueError, match="not reachable from here"):
        dk.endpoint_host("ssh://ops@gpu-box.lab", "127.0.0.1")


def test_target_refuses_remote_engine_with_loopback_publish_up_front():
    with pytest.raises(ValueError, match="remote engine"):
        dk.DockerTarget(environ={"DOCKER_HOST": "tcp://gpu-box.lab:2376"})
    remote = dk.DockerTarget(environ={"DOCKER_HOST": "tcp://gpu-box.lab:2376"}, publish_host="0.0.0.0")
    assert remote.publish_host == "0.0.0.0"


def test_no_engine_is_a_clear_start_error(tmp_path):
    target = dk.DockerTarget(environ={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}, hf_cache=None)
    with pytest.raises(ServerStartError, match=r"no Docker engine answers at unix://.*no\.sock.*Start dockerd"):
        with target.start(SEED):
            pass


def test_unsupported_docker_host_scheme():
    with pytest.raises(ValueError, match="unsupported scheme 'ftp'"):
        dk.engine_host("ftp://x")


# ----------------------------------------------------------------------------- small pieces


def test_labels_and_name_identify_plugin_session_and_spec():
    labels = lo.container_labels("sess123", SEED, gpu=True)
    assert labels[lo.LABEL_PLUGIN] == "pytest-llmperf"
    assert labels[lo.LABEL_SESSION] == "sess123"
    assert labels[lo.LABEL_SPEC] == "qwen3.6-27b-fp8-mtp"
    assert labels[lo.LABEL_GPU] == "1"
    assert (
        dk.container_name(ServerSpec(name="a b/c", model="m"), "0123456789abcdef", 2) == "llmperf-a-b-c-0123456789ab-2"
    )


def test_gpu_device_requests():
    assert dk.gpu_device_requests(False, None) == []
    (all_gpus,) = dk.gpu_device_requests(True, None)
    assert all_gpus["Count"] == -1 and all_gpus["Capabilities"] == [["gpu"]]
    (some,) = dk.gpu_device_requests(True, ["0", "3"])
    assert some["DeviceIDs"] == ["0", "3"] and some["Capabilities"] == [["gpu"]]


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"gpu_device_ids": ["0"]}, "without gpu=True"),
        ({"gpu": True, "gpu_device_ids": [""]}, "non-empty ids"),
        ({"ready_timeout": 0}, "ready_timeout"),
        ({"publish_host": "localhost"}, "IP address"),
        ({"host_port": 70000}, "host_port"),
        ({"image_override": " "}, "image_override"),
        ({"pass_env": ["HF TOKEN"]}, "not one"),
    ],
)
def test_bad_arguments_are_rejected_with_the_fix(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        dk.DockerTarget(**kwargs)


# ----------------------------------------------------------------------------- fake engine


class FakeContainer:
    def __init__(self, client: FakeClient, name: str, labels: dict[str, str], fail_start: bool) -> None:
        self.client = client
        self.id = f"id-{name}"
        self.short_id = self.id[:10]
        self.name = name
        self.labels = labels
        self.status = "created"
        self.fail_start = fail_start
        self.attrs: dict[str, Any] = {"State": {"Status": "created"}, "NetworkSettings": {"Ports": {}}}
        self.removed = False

    def start(self) -> None:
        if self.fail_start:
            raise docker.errors.APIError(f"could not start: token {TOKEN} rejected")

    def reload(self) -> None:
        pass

    def logs(self, **_: Any) -> bytes:
        return f"loading... HF_TOKEN={TOKEN}\n".encode()

    def stop(self, timeout: float = 10) -> None:
        self.status = "exited"

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.removed = True
        self.client.containers.items.remove(self)


class FakeImage:
    id = "sha256:feed"
    attrs = {"RepoDigests": ["vllm/vllm-openai@sha256:abc"]}


class FakeContainers:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.items: list[FakeContainer] = []
        self.create_kwargs: list[dict[str, Any]] = []

    def create(self, image: str, **kwargs: Any) -> FakeContainer:
        self.create_kwargs.append({"image": image, **kwargs})
        c = self.client.container_class(self.client, kwargs["name"], kwargs["labels"], self.client.fail_start)
        self.items.append(c)
        return c

    def list(self, filters: dict[str, Any] | None = None, **_: Any) -> list[FakeContainer]:
        wanted = (filters or {}).get("label", [])
        wanted = [wanted] if isinstance(wanted, str) else wanted
        pairs = [w.split("=", 1) for w in wanted]
        return [c for c in self.items if all(c.labels.get(k) == v for k, v in pairs)]


class FakeImages:
    def get(self, ref: str) -> FakeImage:
        return FakeImage()


class FakeClient:
    container_class: type[FakeContainer] = FakeContainer

    def __init__(self, fail_start: bool = True) -> None:
        self.fail_start = fail_start
        self.containers = FakeContainers(self)
        self.images = FakeImages()


def assert_no_frame_shows(exc: BaseException, secret: str) -> None:
    """What `pytest -l` would print: the repr of every local of every traceback frame."""
    tb = exc.__traceback__
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            assert secret not in repr(value), f"{tb.tb_frame.f_code.co_name}: local {name} shows the secret"
        tb = tb.tb_next


def test_create_call_has_the_seeds_shape_and_failure_removes_the_container(tmp_path: Path):
    client = FakeClient(fail_start=True)
    target = dk.DockerTarget(
        client=client, hf_cache=tmp_path, session_id="s1", environ={"HF_TOKEN": TOKEN}, ready_timeout=5
    )
    with pytest.raises(ServerStartError) as info:
        with target.start(SEED):
            pytest.fail("must not be reached")
    message = str(info.value)
    assert TOKEN not in message and "***" in message
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert_no_frame_shows(info.value, TOKEN)

    (kw,) = client.containers.create_kwargs
    assert kw["image"] == "sha256:feed"
    assert kw["command"] == [
        "Qwen/Qwen3.6-27B-FP8",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--max-model-len",
        "65536",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-seqs",
        "8",
        "--speculative-config",
        json.dumps({"method": "mtp", "num_speculative_tokens": 3}, separators=(",", ":")),
    ]
    assert kw["ipc_mode"] == "host" and kw["init"] is True
    assert kw["ports"] == {"8000/tcp": ("127.0.0.1", None)}
    assert kw["volumes"] == {str(tmp_path): {"bind": "/root/.cache/huggingface", "mode": "rw"}}
    assert dict(kw["environment"]) == {"HF_TOKEN": TOKEN}
    assert kw["device_requests"] == []
    assert kw["labels"][lo.LABEL_SESSION] == "s1"
    assert client.containers.items == []  # removed
    assert dk.LIVE.names() == []


def test_gpu_target_requests_gpus_and_refuses_a_second_gpu_server():
    client = FakeClient(fail_start=False)
    # A GPU container of this plugin already runs: a leftover (its owner is gone; what the
    # message says then: tests/unit/servers/test_docker_leftovers.py).
    elsewhere = Owner("another-host", 1)
    labels = lo.container_labels("other", SEED, gpu=True, owner=elsewhere, created=0.0)  # made in 1970
    client.containers.items.append(FakeContainer(client, "old", labels, fail_start=False))
    target = dk.DockerTarget(client=client, gpu=True, gpu_device_ids=["1"], environ={})
    with pytest.raises(ServerStartError, match="another GPU server .* old .*--llmperf-cleanup"):
        with target.start(SEED):
            pass
    assert client.containers.create_kwargs == []
    # The slot was released: a later start is refused for the same reason, not a stuck lock.
    client.containers.items.clear()
    client.fail_start = True
    with pytest.raises(ServerStartError, match="could not start"):
        with target.start(SEED):
            pass
    (kw,) = client.containers.create_kwargs
    assert kw["device_requests"][0]["DeviceIDs"] == ["1"]


def test_each_server_gets_its_slots_device_request_and_label_and_only_a_server_on_its_gpus_blocks_it():
    """--llmperf-gpus: a server's slot (server name -> GPU ids) is its container's device
    request and its gpus label; a running GPU server blocks a start only where their GPUs
    meet (or where one has every GPU, or no label: an older version's)."""
    client = FakeClient(fail_start=True)  # the create is what is looked at
    elsewhere = Owner("another-host", 1)
    other = lo.container_labels("other", SEED, gpu=True, owner=elsewhere, gpu_ids=["2", "3"])
    assert other[lo.LABEL_GPUS] == "2,3"
    client.containers.items.append(FakeContainer(client, "neighbour", other, fail_start=False))
    target = dk.DockerTarget(client=client, gpu=True, gpu_slots={SEED.name: ["0", "1"]}, environ={})
    with pytest.raises(ServerStartError, match="could not start"):  # not "another GPU server"
        with target.start(SEED):
            pass
    (kw,) = client.containers.create_kwargs
    assert kw["device_requests"][0]["DeviceIDs"] == ["0", "1"]
    assert kw["labels"][lo.LABEL_GPUS] == "0,1"
    clash = dk.DockerTarget(client=client, gpu=True, gpu_slots={SEED.name: ["1", "2"]}, environ={})
    with pytest.raises(ServerStartError, match=r"another GPU server .* neighbour .*at a time on GPUs 1,2: "):
        with clash.start(SEED):
            pass
    assert len(client.containers.create_kwargs) == 1  # refused before a create
    assert lo.gpus_overlap(None, "2,3") and lo.gpus_overlap(["0"], "all") and lo.gpus_overlap(["0"], None)
    assert not lo.gpus_overlap(["0", "1"], "2,3")


def test_a_slot_without_gpus_is_a_label_and_no_device_request():
    client = FakeClient(fail_start=True)
    target = dk.DockerTarget(client=client, gpu=False, gpu_slots={SEED.name: ["3"]}, environ={})
    with pytest.raises(ServerStartError):
        with target.start(SEED):
            pass
    (kw,) = client.containers.create_kwargs
    assert kw["device_requests"] == [] and kw["labels"][lo.LABEL_GPUS] == "3"
    assert lo.LABEL_GPUS not in lo.container_labels("s", SEED, gpu=False)
    assert lo.container_labels("s", SEED, gpu=True)[lo.LABEL_GPUS] == "all"


def test_every_server_runs_on_the_environments_engine_connected_once(monkeypatch):
    asked: list[str | None] = []

    def connect(environ: Any, timeout: Any = None) -> Any:
        asked.append(environ.get("DOCKER_HOST"))
        return FakeClient(fail_start=True)

    monkeypatch.setattr(dk, "connect", connect)
    target = dk.DockerTarget(environ={"DOCKER_HOST": "ssh://gpu-a"}, publish_host="0.0.0.0")
    for spec in (SEED, ServerSpec(name="other", model="org/other")):
        with pytest.raises(ServerStartError, match="could not start"):  # reached the engine
            with target.start(spec):
                pass
    assert asked == ["ssh://gpu-a"]


def test_an_engine_that_stops_answering_during_a_start_is_a_start_error_naming_its_host():
    import requests.exceptions

    class Gone(FakeContainers):
        def create(self, image: str, **kwargs: Any) -> FakeContainer:
            raise requests.exceptions.ConnectionError("Connection aborted: Broken pipe")

    client = FakeClient()
    client.containers = Gone(client)
    target = dk.DockerTarget(client=client, environ={"DOCKER_HOST": "unix:///run/b.sock"})
    with pytest.raises(ServerStartError) as info:
        with target.start(SEED):
            pass
    assert str(info.value) == (
        f"the Docker engine at unix:///run/b.sock stopped answering while starting {SEED.name}: ConnectionError: "
        "Connection aborted: Broken pipe. Check that host is up and its engine answers"
    )


def test_a_container_is_stopped_in_whole_seconds_before_it_is_removed():
    """Docker's Engine API refuses a fractional stop timeout ("t=10.0": 400), so a float
    would skip the graceful stop and leave the container to remove(force)'s SIGKILL."""
    stops: list[object] = []

    class Recording(FakeContainer):
        def stop(self, timeout: float = 10) -> None:
            stops.append(timeout)

    for seconds, sent in ((10.0, 10), (2.5, 3), (5, 5)):
        client = FakeClient()
        container = Recording(client, "c", {}, fail_start=False)
        client.containers.items.append(container)
        remove_container(container, seconds)
        assert stops[-1] == sent and type(stops[-1]) is int and container.removed


def test_a_container_whose_engine_went_away_is_reported_not_raised():
    import requests.exceptions

    said: list[str] = []

    class Gone(FakeContainer):
        def stop(self, timeout: float = 10) -> None:
            raise requests.exceptions.ConnectionError("Connection refused")

        def reload(self) -> None:
            raise requests.exceptions.ConnectionError("Connection refused")

    container = Gone(FakeClient(), "lost", {}, fail_start=False)
    remove_container(container, say=said.append)
    (line,) = said
    assert line.startswith("llmperf: could not remove container lost: its Docker engine does not answer")
    assert "--llmperf-cleanup" in line
    # Asked whether the server is still there (after failed requests): said, not raised.
    assert dk.status_after_start(container) == (
        "the Docker engine does not answer about container lost (ConnectionError)"
    )


def test_gpu_slot_held_while_a_gpu_server_runs():
    dk.GPU_SLOT.acquire()
    try:
        target = dk.DockerTarget(client=FakeClient(), gpu=True, environ={})
        with pytest.raises(ServerStartError, match="already runs a GPU server"):
            with target.start(SEED):
                pass
    finally:
        dk.GPU_SLOT.release()


def test_the_endpoint_says_how_the_container_ended_and_shows_its_log_redacted(monkeypatch):
    """After a run with failed requests the session asks the endpoint: running (None),
    then exited with its code and out-of-memory flag; the log tail never shows a secret."""
    monkeypatch.setattr(dk, "wait_until_ready", lambda *args, **kwargs: None)
    monkeypatch.setattr(dk, "fetch_version", lambda *args, **kwargs: "0.32.0")
    client = FakeClient(fail_start=False)
    client.container_class = GpuContainer  # starts and publishes port 8000
    target = dk.DockerTarget(client=client, environ={"HF_TOKEN": TOKEN})
    with target.start(SEED) as endpoint:
        (container,) = client.containers.items
        assert endpoint.exit_status is not None and endpoint.log_tail is not None
        assert endpoint.exit_status() is None
        container.attrs["State"] = {"Status": "exited", "ExitCode": 137, "OOMKilled": True}
        assert endpoint.exit_status() == f"container {container.name} exited with code 137 (killed: out of memory)"
        assert endpoint.log_tail(20) == "loading... HF_TOKEN=***"

        def engine_gone() -> None:
            raise docker.errors.APIError("engine restarting")

        container.reload = engine_gone
        assert endpoint.exit_status() == (
            f"the Docker engine does not answer about container {container.name} (APIError)"
        )
    assert client.containers.items == []


# ----------------------------------------------------------------------------- peak GPU memory

GPU_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
IDLE = (GPU_FIXTURES / "nvidia-smi-h200-idle.csv").read_text()  # real captures
LOADED = (GPU_FIXTURES / "nvidia-smi-h200-4gpu-loaded.csv").read_text()  # 124115 + 124099 + 4 + 4 MiB


class GpuContainer(FakeContainer):
    """A container that starts, publishes port 8000 and answers `nvidia-smi` with `memory`."""

    memory = IDLE

    def start(self) -> None:
        self.attrs = {"State": {"Status": "running"}, "NetworkSettings": {"Ports": {"8000/tcp": [{"HostPort": "1"}]}}}

    def exec_run(self, cmd: list[str]) -> tuple[int, bytes]:
        assert cmd[0] == "nvidia-smi"
        return 0, self.memory.encode()


def gpu_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repetitions: str, memory_per_run: list[str], gpu: bool = True
):
    """A PerfSession on a --llmperf-gpu DockerTarget over the fake engine (`gpu` False: a
    target with no GPUs to watch); the n-th run makes the container's nvidia-smi read
    memory_per_run[n] until the next run."""
    from pytest_llmperf.judging.session import PerfSession
    from pytest_llmperf.options import resolve_options
    from tests.unit.judging.test_session import make_result

    monkeypatch.setattr(dk, "wait_until_ready", lambda *args, **kwargs: None)

    def no_version(*args, **kwargs):
        raise dk.PageError("no /version")

    monkeypatch.setattr(dk, "fetch_version", no_version)
    client = FakeClient(fail_start=False)
    client.container_class = GpuContainer
    # A long interval: each run's window samples at its start and once more as it closes.
    target = dk.DockerTarget(client=client, gpu=gpu, environ={}, gpu_sample_interval=3600)
    cli = {"llmperf_gpu": True, "llmperf_repetitions": repetitions, "llmperf_update_baselines": True}
    runs = iter(memory_per_run)

    def execute(endpoint, requests, workload, speed):
        (container,) = client.containers.items
        container.memory = next(runs)  # the load this run puts on the GPUs
        return make_result(100.0)

    perf = PerfSession(
        resolve_options(lambda d: cli.get(d), lambda n: ""),
        target,
        tmp_path,
        runner=FakeRunner(execute),
        prompts=lambda endpoint, workload: [],
    )
    return perf, client


def test_peak_gpu_memory_of_each_run_reaches_the_run_and_its_baseline(tmp_path, monkeypatch):
    from pytest_llmperf.workload.workload import resolve_workload

    lighter = "".join(f"NVIDIA H200, 570.133.20, {mib}, 143771\n" for mib in (130000, 90000, 7, 4))
    perf, client = gpu_session(tmp_path, monkeypatch, "2", [LOADED, lighter])
    run = perf.run(SEED, resolve_workload({"num_prompts": 4}, 8))
    # While the server still runs: the figure is the run's, not the server's at its stop.
    assert run.provenance["peak_gpu_memory_mib"] == 124115 + 124099 + 4 + 4  # the heavier repetition
    assert run.provenance["peak_gpu_memory_per_gpu_mib"] == [130000, 124099, 7, 4]  # per GPU over both
    assert run.provenance["gpu_memory_samples"] >= 2  # at least the closing sample of each repetition
    assert run.provenance["gpu_name"] == "NVIDIA H200"

    perf.bind(run, "t").assert_no_regression("decode_tok_s")  # --update-baselines: records
    perf.finish()
    perf.close()
    assert client.containers.items == []
    baseline = json.loads((tmp_path / "baselines" / "NVIDIA-H200" / f"{SEED.name}.json").read_text())
    (entry,) = baseline["concurrency"]["8"].values()  # one workload's entry
    recorded = entry["provenance"]
    assert recorded["peak_gpu_memory_mib"] == 248222
    assert recorded["peak_gpu_memory_per_gpu_mib"] == [130000, 124099, 7, 4]


def test_without_gpus_no_peak_is_sampled(tmp_path, monkeypatch):
    from pytest_llmperf.workload.workload import resolve_workload

    perf, _ = gpu_session(tmp_path, monkeypatch, "1", [LOADED], gpu=False)  # plain --llmperf-docker
    run = perf.run(SEED, resolve_workload({"num_prompts": 4}, 8))
    perf.close()
    assert not any(key.startswith(("peak_gpu", "gpu_memory")) for key in run.provenance)


# ----------------------------------------------------------------------------- SIGTERM handler


class RecordingApi:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove_container(self, container_id: str, force: bool = False, v: bool = False) -> None:
        self.removed.append(container_id)


class ApiClient:
    def __init__(self) -> None:
        self.api = RecordingApi()


def test_sigterm_handler_only_while_containers_run_and_chains_to_previous():
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        before = signal.getsignal(signal.SIGTERM)
        live = LiveContainers()
        client = ApiClient()
        live.add("c1", "one", client)
        assert signal.getsignal(signal.SIGTERM) == live.on_sigterm
        live.add("c2", "two", client)
        live.discard("c2")
        assert signal.getsignal(signal.SIGTERM) == live.on_sigterm  # c1 still runs
        signal.raise_signal(signal.SIGTERM)
        assert client.api.removed == ["c1"]
        assert seen == [signal.SIGTERM]  # the previous handler still ran
        assert signal.getsignal(signal.SIGTERM) is before  # and is back in place
        live.add("c3", "three", client)
        live.discard("c3")
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_no_handler_from_a_worker_thread():
    before = signal.getsignal(signal.SIGTERM)
    live = LiveContainers()
    t = threading.Thread(target=live.add, args=("c1", "one", ApiClient()))
    t.start()
    t.join()
    assert signal.getsignal(signal.SIGTERM) is before
    assert live.remove_all() == ["one"]


# ----------------------------------------------------------------------------- image pulls


class PullingImages:
    def __init__(self) -> None:
        self.present = False

    def get(self, ref: str) -> FakeImage:
        if not self.present:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return FakeImage()


class PullApi:
    def __init__(self, images: PullingImages, events: list[dict[str, Any]]) -> None:
        self.images = images
        self.events = events
        self.pulled: list[str] = []

    def pull(self, ref: str, stream: bool, decode: bool) -> Any:
        self.pulled.append(ref)
        yield from self.events
        self.images.present = True


def pulling_client(events: list[dict[str, Any]]) -> Any:
    client = FakeClient()
    client.images = PullingImages()
    client.api = PullApi(client.images, events)
    return client


def test_missing_image_is_pulled_with_progress():
    events = [
        {"status": "Pulling from vllm/vllm-openai", "id": "cu130-nightly"},
        {"status": "Downloading", "id": "a1b2", "progress": "[=====>     ] 5.1GB/9.8GB"},
        {"status": "Download complete", "id": "a1b2"},
    ]
    client = pulling_client(events)
    lines: list[str] = []
    target = dk.DockerTarget(client=client, progress=lines.append, progress_interval=0.0, environ={})
    image = target.ensure_image(client, "vllm/vllm-openai:cu130-nightly", Secrets())
    assert image.id == "sha256:feed"
    assert client.api.pulled == ["vllm/vllm-openai:cu130-nightly"]
    assert lines[0] == "llmperf: pulling image vllm/vllm-openai:cu130-nightly ..."
    assert any("a1b2 Downloading [=====>     ] 5.1GB/9.8GB" in line for line in lines)


def test_pull_error_in_the_stream_names_the_image():
    client = pulling_client([{"error": "pull access denied for vllm/vllm-openai, repository does not exist"}])
    target = dk.DockerTarget(client=client, environ={})
    with pytest.raises(ServerStartError) as info:
        target.ensure_image(client, "vllm/vllm-openai:nope", Secrets())
    message = str(info.value)
    assert "image 'vllm/vllm-openai:nope' is not present on the Docker engine and could not be pulled" in message
    assert "pull access denied" in message and "--llmperf-image" in message


def test_no_pull_when_pulling_is_off():
    client = pulling_client([])
    target = dk.DockerTarget(client=client, pull=False, environ={})
    with pytest.raises(ServerStartError, match="'img:1' is not present .* pulling is off"):
        target.ensure_image(client, "img:1", Secrets())
    assert client.api.pulled == []
