"""Teardown when the process running the tests is interrupted or killed, leftovers found
by label and cleaned up, and secrets kept out of everything a pytest run writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from pytest_llmperf.servers import leftovers as lo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

HOLD = Path(__file__).with_name("hold_server.py")


def hold(sim_image: str, session: str, phase: str = "READY") -> subprocess.Popen:
    """A process running a sim container via DockerTarget, once it says `phase`
    (READY: serving; LOADING: waiting for a model that never loads)."""
    extra = ["loading"] if phase == "LOADING" else []
    proc = subprocess.Popen(
        [sys.executable, str(HOLD), sim_image, session, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline()
    if not line.startswith(phase):
        proc.kill()
        pytest.fail(f"the holding process did not get ready: {line}{proc.stdout.read()}")
    return proc


@pytest.mark.parametrize(
    "sig, expected_rc",
    [
        (signal.SIGTERM, -signal.SIGTERM),  # our handler removes, then SIGTERM's default: die
        # Ctrl-C: KeyboardInterrupt unwinds through the context manager; Python then
        # ends with SIGINT's status, as a shell expects.
        (signal.SIGINT, -signal.SIGINT),
    ],
    ids=["SIGTERM", "SIGINT"],
)
def test_signal_removes_the_container(docker_client, containers_of, sim_image, test_session_id, sig, expected_rc):
    session = f"{test_session_id}-{sig.name.lower()}"
    proc = hold(sim_image, session)
    try:
        assert len(containers_of(session)) == 1
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == expected_rc, out
    assert "EXITED NORMALLY" not in out
    assert containers_of(session) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_while_the_model_loads_removes_the_container(containers_of, sim_image, test_session_id, sig):
    session = f"{test_session_id}-loading-{sig.name.lower()}"
    proc = hold(sim_image, session, phase="LOADING")
    try:
        assert len(containers_of(session)) == 1
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -sig, out
    assert containers_of(session) == []


def test_killed_session_leftover_is_found_and_cleaned(docker_client, containers_of, sim_image, test_session_id):
    session = f"{test_session_id}-killed"
    proc = hold(sim_image, session)
    (left,) = containers_of(session)
    # While its owner runs it is no leftover, from any session on this host.
    assert left.id not in {j.container.id for j in lo.find_leftovers(docker_client)}
    proc.kill()  # SIGKILL: no handler runs, the container stays
    proc.wait(timeout=30)
    found = {j.container.id: j for j in lo.find_leftovers(docker_client)}
    assert left.id in found
    assert session in found[left.id].line()
    assert found[left.id].reason == f"its owner, pid {proc.pid} on this host, is gone"
    removed, _ = lo.cleanup_leftovers(docker_client)
    assert left.name in {j.name for j in removed}
    assert containers_of(session) == []


def test_failing_pytest_run_leaves_nothing_and_leaks_no_token(
    docker_client, containers_of, sim_image, exiting_image, tmp_path
):
    """A whole pytest run, as a user has it: one test fails inside a running server, one
    fails to start a server that printed the token; run with -l (locals in tracebacks),
    -rA and JUnit XML. Nothing of ours may survive and the token may appear nowhere."""
    token = "hf_pytestRUN_" + uuid.uuid4().hex
    session = f"llmperf-test-run-{uuid.uuid4().hex[:8]}"
    (tmp_path / "test_user_suite.py").write_text(
        textwrap.dedent(f"""
        import pytest
        from pytest_llmperf.servers.docker import DockerTarget
        from pytest_llmperf.servers.spec import ServerSpec

        SPEC = ServerSpec(name="user", model="sim/user", args=("--sim-speed", "50"), env={{"HF_TOKEN": None}})

        def target(image, timeout=60):
            return DockerTarget(image_override=image, hf_cache=None, ready_timeout=timeout,
                                session_id={session!r}, stop_timeout=5, progress=print)

        def test_fails_while_serving():
            with target({sim_image!r}).start(SPEC) as endpoint:
                assert endpoint.model == "something else"

        def test_server_dies_at_start():
            with target({exiting_image!r}, timeout=30).start(SPEC):
                pass
    """)
    )
    junit = tmp_path / "junit.xml"
    env = {**os.environ, "HF_TOKEN": token}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-l",
            "-rA",
            "-s",
            "-vv",
            f"--junitxml={junit}",
            str(tmp_path / "test_user_suite.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "2 failed" in output
    assert "exited with code 3" in output and "HF_TOKEN=***" in output
    xml = junit.read_text()
    assert "exited with code 3" in xml
    # A server that did not start is its one-line reason, no traceback through the target
    # (so -l prints none of its locals; RedactedEnv masks them anyway: tests/unit/util).
    assert "servers/docker.py:" not in output
    assert token not in output
    assert token not in xml
    assert containers_of(session) == []
