"""`llmperf doctor` against the real Docker Engine of this machine, which has no GPU and
no NVIDIA runtime, and no registry.

What is real: the engine, `docker info`'s runtimes, the image lookups and the registry
question, the throwaway container (created from the image, entrypoint overridden,
labelled, started, waited for, removed), the cache folders and the port. What is faked,
in the one test that shows GPUs: `nvidia-smi` is a shell script baked into an image
derived from the local sim image, printing a fixed 8 x H200 CSV, and that test asks the
doctor for no GPU device request and no runtime check (`gpu_request=False`), since this
engine cannot satisfy `--gpus all`. Last, `pytest --llmperf-docker --llmperf-doctor` on
a small project: a failed check stops the session, passed checks let it run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pytest_llmperf.commands import doctor as dr
from pytest_llmperf.kinds import KINDS
from pytest_llmperf.servers import leftovers as lo
from tests.docker.images import build_with_script

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "hf_doctortesttoken1234"
H200_LINE = "NVIDIA H200, 570.133.20, 0, 143771"
FAKE_NVIDIA_SMI = "#!/bin/sh\n" + "".join(f"echo '{H200_LINE}'\n" for _ in range(8))


@pytest.fixture(scope="module")
def fake_gpu_image(docker_client, sim_image):
    tag = build_with_script(docker_client, sim_image, "test-doctor-gpu", "/usr/local/bin/nvidia-smi", FAKE_NVIDIA_SMI)
    yield tag
    docker_client.images.remove(tag, force=True)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    folder = tmp_path / "hf"
    folder.mkdir()
    return folder


def doctor_containers(client) -> list:
    return [
        c
        for c in client.containers.list(all=True, filters={"label": lo.PLUGIN_FILTER}, ignore_removed=True)
        if (c.labels or {}).get(lo.LABEL_SESSION, "").startswith("doctor-")
    ]


@pytest.fixture(autouse=True)
def no_doctor_container_left(docker_client):
    yield
    left = doctor_containers(docker_client)
    for c in left:
        c.remove(force=True, v=True)
    assert not left, f"the doctor left containers behind: {[c.name for c in left]}"


def llmperf_doctor(*args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    if token:
        env["HF_TOKEN"] = TOKEN
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.commands.cli", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_without_gpus_the_gpu_line_fails_with_the_fix_and_the_other_lines_pass(sim_image, cache):
    done = llmperf_doctor("--gpu", "--image", sim_image, "--hf-cache", str(cache))
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert lines[0] == f"llmperf doctor: vLLM containers on GPUs ({sim_image})"
    marks = [line.strip()[:1] for line in lines[1:-1] if not line.strip().startswith("fix:")]
    assert marks == ["✓", "✗", "✓", "-", "✓", "✓", "✓"], done.stdout
    assert lines[1].startswith("  ✓ Docker Engine: Docker Engine ") and "(DOCKER_HOST unset)" in lines[1]
    assert lines[2].startswith("  ✗ GPU support in Docker: no NVIDIA runtime (runtimes: ")
    assert "fix: install the NVIDIA Container Toolkit" in lines[3] and "nvidia-ctk runtime configure" in lines[3]
    assert lines[4].startswith(f"  ✓ image {sim_image}: present: id sha256:")
    assert lines[5] == f"  - GPUs in {sim_image}: not run: the engine refused the container its GPUs (see above)"
    assert lines[6].startswith(f"  ✓ Hugging Face cache: {cache} exists and is writable; ")
    assert lines[7] == "  ✓ HF_TOKEN: set (passed to the server by name, shown as ***)"
    assert lines[8].startswith("  ✓ publish address: 127.0.0.1 binds")
    assert lines[-1] == "1 of 7 checks failed"
    assert TOKEN not in done.stdout + done.stderr


def test_a_fake_nvidia_smi_in_the_image_passes_the_gpu_line_with_its_gpus(docker_client, fake_gpu_image, cache):
    since = time.time() - 1
    environ = dict(os.environ, HF_TOKEN=TOKEN)
    checks = dr.run_doctor(
        dr.DoctorConfig(
            checks=KINDS["gpu"].doctor,
            images=(fake_gpu_image,),
            hf_cache=str(cache),
            gpu_request=False,
            environ=environ,
        )
    )
    assert not dr.failed(checks), dr.format_checks(checks)
    gpus = {c.name: c for c in checks}[f"GPUs in {fake_gpu_image}"]
    assert gpus.status == dr.OK
    assert gpus.detail == (
        "8 x NVIDIA H200, driver 570.133.20, 143771 MiB each (0 MiB in use) (nvidia-smi in a throwaway container)"
    )
    # The engine's record of that container: made from the image with the plugin's labels.
    events = docker_client.events(
        since=int(since), until=int(time.time()) + 1, filters={"type": "container", "event": "create"}, decode=True
    )
    image_id = docker_client.images.get(fake_gpu_image).id
    made = [e["Actor"]["Attributes"] for e in events if e["Actor"]["Attributes"].get("image") == image_id]
    assert len(made) == 1
    labels = made[0]
    assert labels[lo.LABEL_PLUGIN] == lo.PLUGIN_NAME and labels[lo.LABEL_SESSION].startswith("doctor-")
    assert labels[lo.LABEL_OWNER_PID] == str(os.getpid()) and labels[lo.LABEL_GPU] == "0"
    assert labels["name"].startswith("llmperf-doctor-")


def test_an_image_without_nvidia_smi_fails_the_gpu_line_and_its_container_is_removed(sim_image, cache):
    checks = dr.run_doctor(
        dr.DoctorConfig(
            checks=KINDS["gpu"].doctor,
            images=(sim_image,),
            hf_cache=str(cache),
            gpu_request=False,
            environ={"HF_TOKEN": TOKEN},
        )
    )
    (bad,) = dr.failed(checks)
    assert bad.name == f"GPUs in {sim_image}"
    assert '"nvidia-smi": executable file not found' in bad.detail
    assert "the image has no nvidia-smi and the NVIDIA runtime did not inject one" in bad.fix
    # no_doctor_container_left: removed although it failed


def test_a_missing_image_fails_with_its_fix(docker_client, cache):
    missing = f"pytest-llmperf/doctor-missing:{uuid.uuid4().hex[:8]}"
    done = llmperf_doctor("--gpu", "--image", missing, "--hf-cache", str(cache))
    assert done.returncode == 1
    out = done.stdout
    assert f"  ✗ image {missing}: not present on the engine, and its registry cannot be asked: " in out
    assert f"      fix: `docker pull {missing}` on the engine's host" in out
    assert f"  - GPUs in {missing}: not tried: the image is not on the engine" in out


def test_an_unwritable_cache_fails_with_its_fix(sim_image, tmp_path):
    (tmp_path / "file").write_text("not a folder")
    under_file = tmp_path / "file" / "huggingface"
    done = llmperf_doctor("--docker", "--image", sim_image, "--hf-cache", str(under_file))
    assert done.returncode == 1
    assert f"  ✗ Hugging Face cache: {under_file} cannot exist: {tmp_path / 'file'} is a file" in done.stdout
    assert "      fix: give a folder with --hf-cache / --llmperf-hf-cache" in done.stdout
    assert done.stdout.rstrip().endswith("1 of 5 checks failed")

    # A folder root cannot write either: immutable (ext4's chattr +i; skipped where it has none).
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    if subprocess.run(["chattr", "+i", str(frozen)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not supported here: no folder root cannot write")
    try:
        done = llmperf_doctor("--docker", "--image", sim_image, "--hf-cache", str(frozen))
    finally:
        subprocess.run(["chattr", "-i", str(frozen)], check=True)
    assert done.returncode == 1
    assert f"  ✗ Hugging Face cache: {frozen} is not writable: Operation not permitted" in done.stdout
    assert f"      fix: make it writable for the server (`chown -R $USER {frozen}`" in done.stdout


PROJECT_CONFTEST = """
from pytest_llmperf import ServerSpec

def pytest_llmperf_servers():
    return [ServerSpec(name="sim", model="org/sim", image={image!r}, env={{"HF_TOKEN": None}})]
"""
PROJECT_SUITE = """
import pytest

@pytest.mark.llmperf(server="sim", num_prompts=4, max_tokens=8)
def test_perf():  # asks for no llmperf fixture: no server starts
    pass
"""


def test_llmperf_doctor_in_a_docker_session_stops_it_or_lets_it_run(pytester, sim_image, tmp_path, monkeypatch):
    pytester.makeconftest(PROJECT_CONFTEST.format(image=sim_image))
    pytester.makepyfile(PROJECT_SUITE)
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    args = ("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker", "--llmperf-doctor")
    stopped = pytester.runpytest_subprocess(*args, f"--llmperf-hf-cache={tmp_path / 'file' / 'hf'}")
    assert stopped.ret == pytest.ExitCode.USAGE_ERROR
    err = stopped.stderr.str()
    assert "--llmperf-doctor: 1 check(s) failed, the suite did not start:" in err
    assert f"✗ Hugging Face cache: {tmp_path / 'file' / 'hf'} cannot exist: {tmp_path / 'file'} is a file" in err
    assert "fix: give a folder with --hf-cache / --llmperf-hf-cache" in err

    cache = tmp_path / "hf"
    cache.mkdir()
    ran = pytester.runpytest_subprocess(*args, f"--llmperf-hf-cache={cache}")
    ran.assert_outcomes(passed=1)
    ran.stdout.fnmatch_lines(
        [
            "[[]llmperf] doctor: ✓ Docker Engine: Docker Engine * answers at *",
            f"[[]llmperf] doctor: ✓ image {sim_image}: present: id sha256:*",
            f"[[]llmperf] doctor: ✓ Hugging Face cache: {cache} exists and is writable; *",
            "[[]llmperf] doctor: ✓ HF_TOKEN: set (passed to the server by name, shown as ***)",
            "[[]llmperf] doctor: ✓ publish address: 127.0.0.1 binds *",
        ]
    )
    assert TOKEN not in ran.stdout.str() + stopped.stdout.str() + err
