"""The plugin's container options end to end with pytester, against a fake engine: the
leftover notice at the start of a container session (and no Docker at all for other
targets), --llmperf-cleanup's report, and --llmperf-sim-args refused under a container
target. The real engine: tests/reliability/test_sessions_docker.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.owners import current_owner
from tests.unit.servers.test_docker import SEED, FakeClient, FakeContainer

SUITE = "def test_nothing():\n    pass\n"


class Engine(FakeClient):
    connects = 0  # Docker clients the plugin made

    def ping(self) -> bool:
        return True


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Engine:
    """The engine every Docker client the plugin makes talks to; `engine.connects` counts them."""
    fake = Engine(fail_start=False)

    def connect(environ: Any, timeout: float | None = None) -> Engine:
        fake.connects += 1
        return fake

    monkeypatch.setattr(dk, "connect", connect)
    return fake


def add(engine: Engine, name: str, pid: int) -> FakeContainer:
    owner = dataclasses.replace(current_owner(), pid=pid)
    c = FakeContainer(engine, name, lo.container_labels(f"s-{name}", SEED, False, owner=owner), fail_start=False)
    c.status = "running"
    engine.containers.items.append(c)
    return c


def test_a_container_session_reports_leftovers_at_its_start_and_removes_none(pytester, engine):
    add(engine, "llmperf-killed-1", 999_999_999)
    add(engine, "llmperf-mine-1", current_owner().pid)  # this process: not a leftover
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "[[]llmperf] 1 container(s) left by sessions that are gone; remove with pytest --llmperf-cleanup:",
            "[[]llmperf]   llmperf-killed-1 (spec qwen3.6-27b-fp8-mtp, model Qwen/Qwen3.6-27B-FP8, gpu 0, running, "
            "session s-llmperf-killed-1): its owner, pid 999999999 on this host, is gone",
        ]
    )
    assert "llmperf-mine-1" not in result.stdout.str()
    assert [c.name for c in engine.containers.items] == ["llmperf-killed-1", "llmperf-mine-1"]


def test_no_leftovers_no_notice(pytester, engine):
    add(engine, "llmperf-mine-1", current_owner().pid)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-gpu")
    result.assert_outcomes(passed=1)
    assert "[llmperf]" not in result.stdout.str() and engine.connects == 1


@pytest.mark.parametrize("target", [[], ["--llmperf-sim"], ["--llmperf-base-url", "http://127.0.0.1:9"]])
def test_a_session_of_another_target_never_talks_to_docker(pytester, engine, target):
    add(engine, "llmperf-killed-1", 999_999_999)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", *target)
    result.assert_outcomes(passed=1)
    assert engine.connects == 0
    assert "[llmperf]" not in result.stdout.str()


def test_cleanup_says_what_it_removed_and_kept_instead_of_the_notice(pytester, engine):
    add(engine, "llmperf-killed-1", 999_999_999)
    add(engine, "llmperf-mine-1", current_owner().pid)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-docker", "--llmperf-cleanup")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "[[]llmperf] --llmperf-cleanup: removed 1 container(s), kept 1",
            "[[]llmperf]   removed llmperf-killed-1 (*): its owner, pid 999999999 on this host, is gone",
            f"[[]llmperf]   kept llmperf-mine-1 (*): owned by this process (pid {current_owner().pid})",
        ]
    )
    assert "left by sessions that are gone" not in result.stdout.str()
    assert [c.name for c in engine.containers.items] == ["llmperf-mine-1"]


def test_a_bad_cleanup_age_is_a_usage_error(pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "--llmperf-cleanup", "--llmperf-cleanup-age", "a day")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-cleanup-age: expected a duration > 0 such as 30m, 24h, 2d or 3600*"])


def test_sim_args_under_a_container_target_are_a_usage_error_before_anything_starts(pytester, engine):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "--llmperf-docker", "--llmperf-sim-args", "--sim-error-rate 0.2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--llmperf-sim-args only applies to the simulated server (--llmperf-sim): --llmperf-docker runs the image*"]
    )
    assert engine.connects == 0
