"""`llmperf doctor` and --llmperf-doctor with fakes: a fake Docker engine (runtimes,
images, the throwaway nvidia-smi container), fake interpreters and a fake nvidia-smi as
small scripts run for real, real folders for the cache. The real engine:
tests/docker/test_doctor_docker.py."""

from __future__ import annotations

import http.server
import os
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from pytest_llmperf.commands import cli
from pytest_llmperf.commands import doctor as dr
from pytest_llmperf.kinds import KINDS
from pytest_llmperf.options import resolve_options
from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.spec import ServerSpec

NO_DRIVER = 'could not select device driver "" with capabilities: [[gpu]]'
H200_CSV = "NVIDIA H200, 570.133.20, 1, 143771\nNVIDIA H200, 570.133.20, 1, 143771\n"


# --------------------------------------------------------------------------- a fake engine


class FakeImage:
    def __init__(self, ref: str, digest: str | None = "sha256:" + "d" * 64) -> None:
        self.id = "sha256:" + "a" * 64
        repo = ref.rsplit(":", 1)[0]
        self.attrs = {"RepoDigests": [f"{repo}@{digest}"] if digest else [], "Size": 20 * dr.GIB}


class FakeImages:
    def __init__(self, present: dict[str, FakeImage], registry: bool) -> None:
        self.present, self.registry = present, registry
        self.pulled: list[str] = []

    def get(self, ref: str) -> FakeImage:
        if ref not in self.present:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return self.present[ref]

    def get_registry_data(self, ref: str) -> Any:
        if not self.registry:
            raise docker.errors.APIError("500", explanation='Get "https://registry-1.docker.io/v2/": no such host')
        return type("RegistryData", (), {"id": "sha256:" + "e" * 64})()

    def pull(self, ref: str) -> None:
        if not self.registry:
            raise docker.errors.APIError("500", explanation="pull access denied")
        self.pulled.append(ref)
        self.present[ref] = FakeImage(ref)


class FakeContainer:
    def __init__(self, engine: FakeEngine, kwargs: dict[str, Any]) -> None:
        self.engine, self.kwargs = engine, kwargs
        self.id, self.name = "c" * 64, kwargs["name"]
        self.removed = False

    def start(self) -> None:
        if self.engine.start_error:
            raise docker.errors.APIError("400", explanation=self.engine.start_error)

    def wait(self, timeout: float) -> dict[str, int]:
        if self.engine.hang:
            raise ConnectionError("read timed out")
        return {"StatusCode": self.engine.exit_code}

    def logs(self, stdout: bool = True, stderr: bool = True) -> bytes:
        return (self.engine.stdout if stdout else self.engine.stderr).encode()

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.removed = True


class FakeContainers:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.made: list[FakeContainer] = []

    def create(self, image: str, **kwargs: Any) -> FakeContainer:
        container = FakeContainer(self.engine, {"image": image, **kwargs})
        self.made.append(container)
        return container


class FakeEngine:
    def __init__(
        self,
        *,
        runtimes: tuple[str, ...] = ("io.containerd.runc.v2", "nvidia", "runc"),
        images: tuple[str, ...] = (dr.DEFAULT_IMAGE,),
        registry: bool = False,
        stdout: str = H200_CSV,
        stderr: str = "",
        exit_code: int = 0,
        start_error: str = "",
        hang: bool = False,
    ) -> None:
        self.runtimes = runtimes
        self.images = FakeImages({ref: FakeImage(ref) for ref in images}, registry)
        self.containers = FakeContainers(self)
        self.stdout, self.stderr, self.exit_code = stdout, stderr, exit_code
        self.start_error, self.hang = start_error, hang

    def ping(self) -> bool:
        return True

    def version(self) -> dict[str, str]:
        return {"Version": "28.2.2"}

    def info(self) -> dict[str, Any]:
        return {"Runtimes": {name: {"path": name} for name in self.runtimes}, "DefaultRuntime": "runc"}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir()
    return folder


def engine_is(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine | Exception) -> None:
    def connect(environ: Any, timeout: float | None = None) -> FakeEngine:
        if isinstance(engine, Exception):
            raise engine
        return engine

    monkeypatch.setattr(dk, "connect", connect)


def config(cache: Path, **kwargs: Any) -> dr.DoctorConfig:
    values: dict[str, Any] = dict(hf_cache=str(cache), environ={"HF_TOKEN": "hf_secretvalue123"}, timeout=5)
    values.update(kwargs)
    return dr.DoctorConfig(**values)


def by_name(checks: list[dr.Check]) -> dict[str, dr.Check]:
    return {c.name: c for c in checks}


# --------------------------------------------------------------------------- containers


def test_a_gpu_box_passes_every_line_and_shows_the_gpus_from_nvidia_smi_in_a_removed_container(monkeypatch, cache):
    engine = FakeEngine()
    engine_is(monkeypatch, engine)
    checks = dr.run_doctor(config(cache))
    assert [c.status for c in checks] == [dr.OK] * len(checks), dr.format_checks(checks)
    assert [c.name for c in checks] == [
        "Docker Engine",
        "GPU support in Docker",
        f"image {dr.DEFAULT_IMAGE}",
        f"GPUs in {dr.DEFAULT_IMAGE}",
        "Hugging Face cache",
        "HF_TOKEN",
        "publish address",
    ]
    lines = by_name(checks)
    assert (
        "2 x NVIDIA H200, driver 570.133.20, 143771 MiB each (2 MiB in use)"
        in lines[f"GPUs in {dr.DEFAULT_IMAGE}"].detail
    )
    assert "digest sha256:dddd" in lines[f"image {dr.DEFAULT_IMAGE}"].detail
    assert "unix:///var/run/docker.sock (DOCKER_HOST unset)" in lines["Docker Engine"].detail
    (container,) = engine.containers.made
    assert container.removed
    kwargs = container.kwargs
    assert kwargs["entrypoint"] == ["nvidia-smi"]
    assert kwargs["command"] == [
        "--query-gpu=name,driver_version,memory.used,memory.total",
        "--format=csv,noheader,nounits",
    ]
    assert kwargs["network_disabled"] is True
    assert [r.capabilities for r in kwargs["device_requests"]] == [[["gpu"]]]
    labels = kwargs["labels"]
    assert labels[lo.LABEL_PLUGIN] == lo.PLUGIN_NAME
    assert labels[lo.LABEL_SESSION].startswith("doctor-")
    assert labels[lo.LABEL_GPU] == "0"  # not a GPU server: a running suite must not wait on it
    assert labels[lo.LABEL_OWNER_PID] == str(os.getpid())
    assert not dk.LIVE.names()


def test_no_nvidia_runtime_fails_the_gpu_line_once_with_the_toolkit_fix(monkeypatch, cache):
    engine = FakeEngine(
        runtimes=("io.containerd.runc.v2", "runc"),
        start_error='could not select device driver "" with capabilities: [[gpu]]',
    )
    engine_is(monkeypatch, engine)
    checks = dr.run_doctor(config(cache))
    lines = by_name(checks)
    gpu = lines["GPU support in Docker"]
    assert gpu.failed and "no NVIDIA runtime (runtimes: io.containerd.runc.v2, runc)" in gpu.detail
    assert "nvidia-ctk runtime configure --runtime=docker" in gpu.fix
    container = lines[f"GPUs in {dr.DEFAULT_IMAGE}"]
    assert container.status == dr.SKIP and "the engine refused the container its GPUs" in container.detail
    assert [c.name for c in dr.failed(checks)] == ["GPU support in Docker"]
    assert [c.removed for c in engine.containers.made] == [True]


def test_no_runtime_listed_but_the_gpu_request_works_passes(monkeypatch, cache):
    """Docker gives `--gpus` wherever the NVIDIA hook is installed, runtime registered or not."""
    engine_is(monkeypatch, FakeEngine(runtimes=("runc",)))
    checks = dr.run_doctor(config(cache))
    assert not dr.failed(checks), dr.format_checks(checks)
    assert "but `--gpus all` works" in by_name(checks)["GPU support in Docker"].detail


def test_cdi_gpu_devices_count_as_gpu_support():
    info = {"Runtimes": {"runc": {}}, "DiscoveredDevices": [{"Source": "cdi", "ID": "nvidia.com/gpu=0"}]}
    check = dr.gpu_runtime_check(info)
    assert check.status == dr.OK and "nvidia.com/gpu=0" in check.detail


@pytest.mark.parametrize(
    ("engine", "expected", "fix"),
    [
        (FakeEngine(exit_code=9, stderr="NVIDIA-SMI has failed because it couldn't communicate with the driver"),
         "nvidia-smi exited with 9 in the container: NVIDIA-SMI has failed", "nvidia-smi` on the host"),
        (FakeEngine(start_error='exec: "nvidia-smi": executable file not found in $PATH'),
         'the container did not run: exec: "nvidia-smi": executable file not found', "image has no nvidia-smi"),
        (FakeEngine(start_error='could not select device driver "" with capabilities: [[gpu]]'),
         "could not select device driver", "nvidia-ctk"),
        (FakeEngine(stdout="name, driver_version\nNVIDIA H200, 570\n"), "did not parse", "nvidia-smi"),
        (FakeEngine(hang=True), "nvidia-smi did not answer within 5s", "hung driver"),
    ],
)  # fmt: skip
def test_a_broken_gpu_container_fails_with_its_fix_and_is_removed(monkeypatch, cache, engine, expected, fix):
    engine_is(monkeypatch, engine)
    line = by_name(dr.run_doctor(config(cache)))[f"GPUs in {dr.DEFAULT_IMAGE}"]
    assert line.failed and expected in line.detail and fix in line.fix
    assert [c.removed for c in engine.containers.made] == [True]
    assert not dk.LIVE.names()


def test_without_a_device_request_no_runtime_check_and_no_gpus_requested(monkeypatch, cache):
    """How the real-engine test runs a fake nvidia-smi: the runtime is not checked."""
    engine = FakeEngine(runtimes=("runc",))
    engine_is(monkeypatch, engine)
    checks = dr.run_doctor(config(cache, gpu_request=False))
    assert "GPU support in Docker" not in by_name(checks)
    assert not dr.failed(checks)
    assert engine.containers.made[0].kwargs["device_requests"] == []


def test_no_engine_fails_the_first_line_with_the_fix_and_skips_what_needs_it(monkeypatch, cache):
    engine_is(monkeypatch, docker.errors.DockerException("Error while fetching server API version: No such file"))
    checks = dr.run_doctor(config(cache, environ={"HF_TOKEN": "hf_x1234567"}))
    lines = by_name(checks)
    assert lines["Docker Engine"].failed
    assert "systemctl start docker" in lines["Docker Engine"].fix
    assert lines["GPU support in Docker"].status == dr.SKIP
    assert lines[f"image {dr.DEFAULT_IMAGE}"].status == dr.SKIP
    assert [c.name for c in dr.failed(checks)] == ["Docker Engine"]


def test_the_engine_line_names_the_docker_host(monkeypatch, cache):
    engine_is(monkeypatch, ConnectionError("connection refused"))
    line = dr.run_doctor(config(cache, environ={"DOCKER_HOST": "tcp://127.0.0.1:2375", "HF_TOKEN": "hf_abcdefgh"}))[0]
    assert "tcp://127.0.0.1:2375 (DOCKER_HOST)" in line.detail and "DOCKER_HOST names a running engine" in line.fix


def test_a_missing_image_fails_with_the_pull_fix_or_warns_when_the_registry_has_it(monkeypatch, cache):
    engine_is(monkeypatch, FakeEngine(images=()))
    lines = by_name(dr.run_doctor(config(cache)))
    image = lines[f"image {dr.DEFAULT_IMAGE}"]
    assert image.failed and "its registry cannot be asked: Get " in image.detail
    assert f"docker pull {dr.DEFAULT_IMAGE}" in image.fix
    assert lines[f"GPUs in {dr.DEFAULT_IMAGE}"].status == dr.SKIP

    engine = FakeEngine(images=(), registry=True)
    engine_is(monkeypatch, engine)
    image = by_name(dr.run_doctor(config(cache)))[f"image {dr.DEFAULT_IMAGE}"]
    assert image.status == dr.WARN and "pullable (registry digest sha256:eeee" in image.detail
    assert engine.images.pulled == []  # asked, not pulled

    checks = dr.run_doctor(config(cache, pull=True))
    assert by_name(checks)[f"image {dr.DEFAULT_IMAGE}"].detail.startswith("pulled: id sha256:aaaa")
    assert engine.images.pulled == [dr.DEFAULT_IMAGE] and not dr.failed(checks)


def test_the_docker_target_has_no_gpu_lines(monkeypatch, cache):
    engine = FakeEngine(runtimes=("runc",), images=("pytest-llmperf/sim-vllm:local",))
    engine_is(monkeypatch, engine)
    docker_checks = KINDS["docker"].doctor
    checks = dr.run_doctor(
        config(cache, checks=docker_checks, images=("pytest-llmperf/sim-vllm:local",), models=("o/m",))
    )
    assert [c.name for c in checks] == [
        "Docker Engine",
        "image pytest-llmperf/sim-vllm:local",
        "Hugging Face cache",
        "HF_TOKEN",
        "publish address",
    ]
    assert not dr.failed(checks) and engine.containers.made == []


def test_a_token_value_never_shows(monkeypatch, cache):
    engine_is(monkeypatch, RuntimeError("engine said HF_TOKEN=hf_secretvalue123"))
    text = "\n".join(dr.format_checks(dr.run_doctor(config(cache))))
    assert "hf_secretvalue123" not in text and "HF_TOKEN=***" in text


# --------------------------------------------------------------------------- cache, tokens, port


def test_cache_missing_under_a_file_and_unwritable_each_fail_with_their_fix(tmp_path, monkeypatch):
    (missing,) = dr.check_hf_cache(str(tmp_path / "nope"), (), {})
    assert missing.failed and "does not exist" in missing.detail and f"mkdir -p {tmp_path / 'nope'}" in missing.fix

    (local,) = dr.check_hf_cache(str(tmp_path / "nope"), (), {}, local=True)  # vLLM makes its own
    assert local.status == dr.WARN and "vLLM creates it at its first download" in local.detail

    (tmp_path / "file").write_text("x")
    (under_file,) = dr.check_hf_cache(str(tmp_path / "file" / "hf"), (), {})
    assert under_file.failed and f"{tmp_path / 'file'} is a file" in under_file.detail

    (not_dir,) = dr.check_hf_cache(str(tmp_path / "file"), (), {})
    assert not_dir.failed and "is not a folder" in not_dir.detail


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysfs")
def test_a_folder_even_root_cannot_write_fails_with_the_writable_fix():
    """sysfs refuses new files to everyone, root included: the doctor writes, it does not trust mode bits."""
    if os.access("/sys/fs", os.W_OK) and os.geteuid() != 0:
        pytest.skip("/sys/fs looks writable to this user")
    (line,) = dr.check_hf_cache("/sys/fs", (), {})
    assert line.failed and "/sys/fs is not writable" in line.detail and "chown -R" in line.fix


def add_model(cache: Path, model: str, files: dict[str, int], *, dangling: int = 0) -> None:
    root = dr.model_cache_dir(cache, model)
    blobs, snap = root / "blobs", root / "snapshots" / ("f" * 40)
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for i, (name, size) in enumerate(files.items()):
        blob = blobs / f"blob{i}"
        blob.write_bytes(b"\0" * size)
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    for i in range(dangling):
        (snap / f"missing{i}.safetensors").symlink_to("../../blobs/gone")
    second = root / "snapshots" / ("0" * 40)  # an older revision sharing a blob: counted once
    second.mkdir()
    (second / "config.json").symlink_to(os.path.relpath(blobs / "blob0", second))


def test_a_cached_model_is_sized_from_its_snapshots_against_the_free_space(cache):
    add_model(cache, "Org/Model-7B", {"config.json": 1000, "model.safetensors": 5000})
    assert dr.cached_model_size(cache, "Org/Model-7B") == (6000, 2, 0)
    checks = dr.check_hf_cache(str(cache), ("Org/Model-7B", "Org/Absent"), {})
    lines = by_name(checks)
    assert lines["Hugging Face cache"].status == dr.OK and "GiB free" in lines["Hugging Face cache"].detail
    assert lines["model Org/Model-7B"].status == dr.OK
    assert "cached: 0.0 GiB in 2 snapshot(s)" in lines["model Org/Model-7B"].detail
    absent = lines["model Org/Absent"]
    assert absent.status == dr.WARN and "not in the cache" in absent.detail
    assert "huggingface-cli download Org/Absent" in absent.fix


def test_an_interrupted_download_fails_and_too_little_space_warns(cache, monkeypatch):
    add_model(cache, "Org/Broken", {"config.json": 10}, dangling=2)
    line = by_name(dr.check_hf_cache(str(cache), ("Org/Broken",), {}))["model Org/Broken"]
    assert line.failed and "2 snapshot file(s) point at missing blobs" in line.detail

    add_model(cache, "Org/Big", {"model.safetensors": 4096})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: type("U", (), {"free": 100})())
    line = by_name(dr.check_hf_cache(str(cache), ("Org/Big",), {}))["model Org/Big"]
    assert line.status == dr.WARN and "less free space than the model's size" in line.detail


def test_the_cache_of_a_remote_engine_is_not_checked_here():
    (line,) = dr.check_hf_cache("/data/hf", (), {"DOCKER_HOST": "ssh://me@gpu-box"}, remote_engine=True)
    assert line.status == dr.SKIP and "gpu-box" in line.detail


def test_tokens():
    (ok,) = dr.check_tokens(("HF_TOKEN",), {"HF_TOKEN": "hf_1"})
    (unset,) = dr.check_tokens(("HF_TOKEN",), {})
    assert ok.status == dr.OK and "***" in ok.detail
    assert unset.failed and "export HF_TOKEN=hf_..." in unset.fix
    assert dr.check_tokens((), {}) == []


def test_publish_address():
    assert dr.check_publish("127.0.0.1", {}).status == dr.OK
    documentation_only = dr.check_publish("192.0.2.7", {})  # TEST-NET-1: on no machine
    assert documentation_only.failed and "cannot bind 192.0.2.7" in documentation_only.detail
    remote = dr.check_publish("127.0.0.1", {"DOCKER_HOST": "tcp://gpu-box:2376"})
    assert remote.failed and "remote engine" in remote.detail
    assert dr.check_publish("0.0.0.0", {"DOCKER_HOST": "tcp://gpu-box:2376"}).status == dr.SKIP


# --------------------------------------------------------------------------- local process


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_local_vllm_interpreter_its_version_and_cuda_visible_devices(tmp_path):
    python = script(tmp_path / "python", 'echo "0.32.0+cu130"\n')
    checks = dr.check_local_vllm(python, {"CUDA_VISIBLE_DEVICES": "0,1", "PATH": os.environ["PATH"]})
    assert [(c.name, c.status, c.detail) for c in checks] == [
        ("interpreter", dr.OK, python),
        ("import vllm", dr.OK, "vLLM 0.32.0+cu130"),
        ("CUDA_VISIBLE_DEVICES", dr.OK, "0,1 (vLLM sees only these GPUs)"),
    ]


def test_an_interpreter_without_vllm_fails_with_the_install_fix():
    """This test's own Python has no vllm: a real `import vllm` failing."""
    checks = by_name(dr.check_local_vllm(sys.executable, dict(os.environ, PYTHONPATH="")))
    line = checks["import vllm"]
    assert line.failed and "No module named 'vllm'" in line.detail and "-m pip install vllm" in line.fix


def test_missing_hanging_interpreters_and_hidden_gpus_fail(tmp_path):
    (missing,) = dr.check_local_vllm(str(tmp_path / "venv" / "bin" / "python"), {})
    assert missing.failed and "not an executable file" in missing.detail
    (not_on_path,) = dr.check_local_vllm("python-with-vllm-nowhere", {"PATH": str(tmp_path)})
    assert not_on_path.failed and "not on PATH" in not_on_path.detail
    hangs = script(tmp_path / "slow", "sleep 30\n")
    line = by_name(dr.check_local_vllm(hangs, {"CUDA_VISIBLE_DEVICES": ""}, timeout=0.5))
    assert line["import vllm"].failed and "did not finish within 0s" in line["import vllm"].detail
    assert line["CUDA_VISIBLE_DEVICES"].failed and "unset CUDA_VISIBLE_DEVICES" in line["CUDA_VISIBLE_DEVICES"].fix
    assert dr.cuda_visible_devices_check({}).detail.startswith("unset")


def test_the_hosts_gpus_from_a_fake_nvidia_smi_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script(bin_dir / "nvidia-smi", f"printf '{H200_CSV}'\n")
    line = dr.check_host_gpus({"PATH": str(bin_dir)})
    assert line.status == dr.OK and line.detail.startswith("2 x NVIDIA H200, driver 570.133.20")
    missing = dr.check_host_gpus({"PATH": str(tmp_path)})
    assert missing.failed and "--no-gpu" in missing.fix


# --------------------------------------------------------------------------- the command


def test_format_marks_and_fixes():
    checks = [dr.Check("a", dr.OK, "fine"), dr.Check("b", dr.FAIL, "broken", "mend it"), dr.Check("c", dr.SKIP, "why")]
    assert dr.format_checks(checks) == ["✓ a: fine", "✗ b: broken", "    fix: mend it", "- c: why"]
    assert dr.format_checks(checks, ascii_marks=True)[:2] == ["PASS a: fine", "FAIL b: broken"]
    assert dr.summary_line(checks) == "1 of 3 checks failed"
    assert dr.summary_line(checks[:1]) == "all 1 checks passed"


def test_llmperf_doctor_prints_the_checklist_and_exits_1_on_a_failure(monkeypatch, cache, capsys):
    engine_is(monkeypatch, FakeEngine(runtimes=("runc",), images=("my/vllm:nightly",), start_error=NO_DRIVER))
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    code = cli.main(["doctor", "--image", "my/vllm:nightly", "--hf-cache", str(cache), "--model", "o/m"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[0] == "llmperf doctor: vLLM containers on GPUs (my/vllm:nightly)"
    assert "  ✗ GPU support in Docker: no NVIDIA runtime (runtimes: runc)" in out
    assert "  ✓ image my/vllm:nightly: present" in out and "  ! model o/m: not in the cache" in out
    assert out.rstrip().endswith("1 of 8 checks failed, 1 warning(s)")


def test_llmperf_doctor_exits_0_when_every_check_passes(monkeypatch, cache, capsys):
    engine_is(monkeypatch, FakeEngine(runtimes=("runc",), images=("sim:local",)))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    code = cli.main(["doctor", "--docker", "--image", "sim:local", "--hf-cache", str(cache), "--no-token", "--ascii"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  PASS Docker Engine" in out and "HF_TOKEN" not in out and "all 4 checks passed" in out


def test_llmperf_doctor_local(tmp_path, capsys, monkeypatch):
    python = script(tmp_path / "python", 'echo "0.32.0"\n')
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    code = cli.main(["doctor", "--local", python, "--no-gpu", "--no-token"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"llmperf doctor: vLLM as a local process ({python})" in out
    assert "✓ import vllm: vLLM 0.32.0" in out and f"✓ Hugging Face cache: {tmp_path} exists" in out


def test_llmperf_doctor_real_cpu_checks_the_prepared_interpreter(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(dr, "prepared_python", lambda: str(tmp_path / "venv" / "bin" / "python"))
    code = cli.main(["doctor", "--real-cpu", "--no-token", "--hf-cache", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"✗ interpreter: {tmp_path / 'venv' / 'bin' / 'python'}: not an executable file" in out
    assert "GPUs on this machine" not in out  # the CPU build


class VersionHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b'{"version": "0.32.0"}'
        self.send_response(200 if self.path == "/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_external_server_answers_version_or_fails_with_the_fix(capsys):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), VersionHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert cli.main(["doctor", "--base-url", url]) == 0
        assert f"✓ server: {url} answers: vLLM 0.32.0" in capsys.readouterr().out
    finally:
        server.shutdown()
        server.server_close()
    assert cli.main(["doctor", "--base-url", url]) == 1
    out = capsys.readouterr().out
    assert f"✗ server: {url} does not answer /version" in out and "fix: start the server, or fix the URL" in out


def test_doctor_arguments_are_checked():
    with pytest.raises(SystemExit):
        cli.main(["doctor", "--docker", "--local"])  # one target
    assert cli.main(["doctor", "--timeout", "0"]) == cli.EXIT_ERROR


# --------------------------------------------------------------------------- the plugin


def options(**cli_values: Any) -> Any:
    values = {f"llmperf_{k}": v for k, v in cli_values.items()}
    return resolve_options(lambda dest: values.get(dest), lambda name: "")


def test_the_plugins_config_reads_the_target_and_the_servers():
    a = ServerSpec(name="a", model="Org/A", image="vllm/vllm-openai:v1", env={"HF_TOKEN": None})
    b = ServerSpec(name="b", model="Org/B", image="vllm/vllm-openai:v1", env={"OTHER": "given"})
    cfg = dr.config_from_options(options(gpu=True, hf_cache="/data/hf"), [a, b, a], environ={})
    assert (cfg.checks, cfg.images, cfg.models, cfg.tokens) == (
        KINDS["gpu"].doctor,
        ("vllm/vllm-openai:v1",),
        ("Org/A", "Org/B"),
        ("HF_TOKEN",),
    )
    assert cfg.hf_cache == "/data/hf"
    assert dr.config_from_options(options(gpu=True, image="x/nightly"), [a, b]).images == ("x/nightly",)
    assert dr.config_from_options(options(sim=True), [a]).checks is KINDS["sim"].doctor
    assert dr.config_from_options(options(base_url="http://h:1"), [a]).base_url == "http://h:1"


def test_the_checks_are_the_chosen_kinds_own_an_added_kind_too():
    from pytest_llmperf.doctor_checks.sets import DoctorChecks
    from pytest_llmperf.kinds import TargetKind

    def booked(config: dr.DoctorConfig) -> list[dr.Check]:
        return [dr.Check("pool", dr.OK, f"{len(config.models)} model(s) booked")]

    lab = TargetKind("lab", KINDS["sim"].factory, doctor=DoctorChecks("a lab's pool", booked, lambda config: ""))
    chosen = resolve_options(lambda dest: {"llmperf_target": "lab"}.get(dest), lambda name: "", [lab])
    cfg = dr.config_from_options(chosen, [ServerSpec(name="a", model="Org/A")], environ={})
    assert cfg.checks is lab.doctor
    assert dr.format_checks(dr.run_doctor(cfg)) == ["✓ pool: 1 model(s) booked"]


CONFTEST = """
from pytest_llmperf import ServerSpec

def pytest_llmperf_servers():
    return [ServerSpec(name="gated", model="Org/Gated", image="my/vllm:nightly", env={"HF_TOKEN": None})]
"""
SUITE = """
import pytest

@pytest.mark.llmperf(server="gated", num_prompts=4, max_tokens=8)
def test_perf(llmperf):
    pass

def test_plain():
    pass
"""


def test_llmperf_doctor_stops_the_session_listing_the_failed_lines_with_their_fixes(pytester, monkeypatch, cache):
    engine_is(monkeypatch, FakeEngine(runtimes=("runc",), images=(), start_error=NO_DRIVER))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-gpu", "--llmperf-doctor",
        f"--llmperf-hf-cache={cache}",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--llmperf-doctor: 3 check(s) failed, the suite did not start:" in err
    assert "✗ GPU support in Docker: no NVIDIA runtime" in err and "fix: install the NVIDIA Container Toolkit" in err
    assert "✗ image my/vllm:nightly: not present" in err and "fix: `docker pull my/vllm:nightly`" in err
    assert "✗ HF_TOKEN: not set" in err and "fix: `export HF_TOKEN=hf_...`" in err
    assert "Docker Engine" not in err  # only the failed lines


def test_llmperf_doctor_passes_and_says_so_before_the_first_test(pytester, monkeypatch, cache):
    engine = FakeEngine(images=("my/vllm:nightly",))
    engine_is(monkeypatch, engine)
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE.replace("def test_perf(llmperf):", "def test_perf():"))  # starts no server
    result = pytester.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-gpu", "--llmperf-doctor",
        f"--llmperf-hf-cache={cache}",
    )  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "[[]llmperf] doctor: ✓ Docker Engine: Docker Engine 28.2.2 answers at *",
            "[[]llmperf] doctor: ✓ GPUs in my/vllm:nightly: 2 x NVIDIA H200, driver 570.133.20, *",
            "[[]llmperf] doctor: ! model Org/Gated: not in the cache*",
        ]
    )
    assert [c.removed for c in engine.containers.made] == [True]


def test_without_the_option_or_a_perf_test_no_doctor(pytester, monkeypatch):
    engine_is(monkeypatch, RuntimeError("the doctor must not run"))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE.replace("def test_perf(llmperf):", "def test_perf():"))
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-gpu")
    result.assert_outcomes(passed=2)
    assert "[llmperf] doctor" not in result.stdout.str()
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-doctor", "-k", "plain")
    result.assert_outcomes(passed=1, deselected=1)  # no target: performance tests skip, nothing to check
    assert "[llmperf] doctor" not in result.stdout.str()
    assert [c.status for c in dr.run_doctor(dr.config_from_options(options(sim=True), []))] == [dr.OK]
