"""The plugin's container options end to end with pytester, against a fake engine:
--llmperf-cleanup's report and --llmperf-cleanup-age."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pytest_llmperf.servers import docker as dk
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
    c = FakeContainer(engine, name, dk.container_labels(f"s-{name}", SEED, False, owner=owner), fail_start=False)
    c.status = "running"
    engine.containers.items.append(c)
    return c


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
    assert [c.name for c in engine.containers.items] == ["llmperf-mine-1"]


def test_a_bad_cleanup_age_is_a_usage_error(pytester):
    pytester.makepyfile(SUITE)
    result = pytester.runpytest("-p", "no:benchmark", "--llmperf-cleanup", "--llmperf-cleanup-age", "a day")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-cleanup-age: expected a duration > 0 such as 30m, 24h, 2d or 3600*"])
