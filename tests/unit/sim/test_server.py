"""The three ways to start the simulator, vLLM's command-line shape, and clean exits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.sim import SimConfig, simulated_server

MTP = {"method": "mtp", "num_speculative_tokens": 3}


def start_cli(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_llmperf.sim", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline()
    assert "http://" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line[line.index("http://") :].split()[0]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_takes_vllm_argv_and_exits_cleanly_on_signal(sig):
    proc, url = start_cli(
        "Qwen/Qwen3.6-27B-FP8",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--max-model-len",
        "65536",
        "--gpu-memory-utilization",
        "0.85",
        "--max-num-seqs",
        "8",
        "--enforce-eager",
        "--speculative-config",
        json.dumps(MTP),
        "--served-model-name",
        "qwen27",
        "--sim-speed",
        "100",
    )
    try:
        models = httpx.get(f"{url}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "qwen27"
        assert models["data"][0]["max_model_len"] == 65536
        state = httpx.get(f"{url}/sim/state", timeout=10).json()
        assert state["profile"] == "qwen3.6-27b-fp8" and state["num_speculative_tokens"] == 3
        r = httpx.post(f"{url}/v1/completions", json={"model": "qwen27", "prompt": "hi", "max_tokens": 8}, timeout=30)
        assert r.json()["usage"]["completion_tokens"] == 8
    finally:
        proc.send_signal(sig)
        rc = proc.wait(timeout=15)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert rc == 0, err
    assert "ignoring vLLM argument --gpu-memory-utilization (no effect" in err
    assert "ignoring vLLM argument --enforce-eager" in err


def test_cli_rejects_bad_arguments_with_a_message():
    r = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.sim", "m", "--speculative-config", "{bad"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "--speculative-config is not valid JSON" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.sim", "m", "--sim-nope", "1"], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and "unknown simulator flag --sim-nope" in r.stderr


def test_crash_exit_ends_the_process_with_code_1():
    proc, url = start_cli(
        "m", "--port", "0", "--sim-speed", "50", "--sim-crash-after-requests", "0", "--sim-crash-exit"
    )
    try:
        r = httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": "x", "max_tokens": 2}, timeout=10)
        assert r.status_code == 500
        rc = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert rc == 1


def test_process_mode_serves_and_leaves_nothing_behind():
    config = SimConfig(model="m", speed=50)
    with simulated_server(config, mode="process") as url:
        pid = _server_pid(url)
        r = httpx.post(f"{url}/v1/completions", json={"model": "m", "prompt": "x", "max_tokens": 4})
        assert r.json()["usage"]["completion_tokens"] == 4
        assert pid != os.getpid() and alive(pid)
    assert not alive(pid)


def test_process_mode_cleans_up_when_the_body_raises():
    with pytest.raises(RuntimeError, match="boom"):
        with simulated_server(SimConfig(model="m"), mode="process") as url:
            pid = _server_pid(url)
            raise RuntimeError("boom")
    assert not alive(pid)


def test_thread_mode_cleans_up_when_the_body_raises():
    before = set(threading.enumerate())
    with pytest.raises(RuntimeError, match="boom"):
        with simulated_server(SimConfig(model="m")) as url:
            assert httpx.get(f"{url}/health").status_code == 200
            raise RuntimeError("boom")
    assert set(threading.enumerate()) <= before
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/health", timeout=2)


def test_thread_mode_stops_with_a_stream_in_flight():
    with simulated_server(SimConfig(model="m", speed=1)) as url:
        with httpx.stream(
            "POST",
            f"{url}/v1/completions",
            timeout=10,
            json={"model": "m", "prompt": "x", "max_tokens": 5000, "stream": True},
        ) as r:
            next(r.iter_lines())
    # Leaving the block with an unfinished stream did not hang and left no thread.
    assert not [t for t in threading.enumerate() if t.name.startswith("sim-server")]


def test_bad_mode():
    with pytest.raises(ValueError, match="mode"):
        with simulated_server(SimConfig(model="m"), mode="docker"):
            pass


def _server_pid(url: str) -> int:
    return httpx.get(f"{url}/sim/state", timeout=10).json()["pid"]


PARENT = """
import sys, time
import httpx
from pytest_llmperf.sim import SimConfig, simulated_server
with simulated_server(SimConfig(model="m"), mode="process") as url:
    print(httpx.get(url + "/sim/state", timeout=5).json()["pid"], flush=True)
    time.sleep(120)
"""


def _exited(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (its parent died: init reaps it, maybe late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_process_mode_child_exits_when_its_parent_dies_without_stopping_it(sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(parent.pid, sig)  # neither runs the context manager's cleanup
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _exited(child):
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail(f"the simulator (pid {child}) outlived its parent killed by {sig.name}")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_child_process_says_its_url_exit_code_and_last_lines_without_deliberate_reset_tracebacks():
    from pytest_llmperf.sim.server import simulated_process

    config = SimConfig(model="m", speed=50, reset_after_chunks=2, crash_after_requests=2, crash_exit=True)
    with simulated_process(config) as sim:
        assert sim.returncode is None and sim.url.startswith("http://127.0.0.1:")
        body = {"model": "m", "prompt": "hi", "max_tokens": 8, "stream": True}
        for _ in range(3):  # reset mid-stream twice, then the engine dies and the process exits
            try:
                httpx.post(f"{sim.url}/v1/completions", json=body, timeout=10)
            except httpx.HTTPError:
                pass
        deadline = time.monotonic() + 10
        while sim.returncode is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sim.returncode == 1
        lines = sim.output_tail(50)
        assert any("engine dead (crash_after_requests=2)" in line for line in lines)
        assert not [line for line in lines if "Traceback" in line or "Exception in ASGI application" in line]
        assert sim.output_tail(1) == lines[-1:] and sim.output_tail(0) == []


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="reads /proc/PID/limits")
def test_the_cli_raises_its_own_open_files_soft_limit_as_vllm_does():
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (64, 4096)); "
        "from pytest_llmperf.sim.__main__ import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "m", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert "http://" in proc.stdout.readline()
        limits = Path(f"/proc/{proc.pid}/limits").read_text()
        (line,) = [ln for ln in limits.splitlines() if ln.startswith("Max open files")]
        assert line.split()[3:5] == ["4096", "4096"]  # soft up to the hard limit (under 65535)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
