"""A night as independent shard processes on one real PostgreSQL store: `llmperf report
--store` joins them into the verdicts one unsharded run gives, and names a shard whose
process was killed (exit 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from pytest_llmperf.commands.cli import main as llmperf
from tests.plugin_project import make_project
from tests.unit.test_plugin_gpus import FLEET_CONFTEST

SUITE = """
import pytest

W = dict(num_prompts=6, max_tokens=16, warmup=1)
NAMES = ["m1", "m2", "m3"]


def on(server, base=None):
    return pytest.param(server, marks=pytest.mark.llmperf(server=server, base=base, **W), id=server)


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n) for n in NAMES])
def test_base(llmperf, server, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")


@pytest.mark.parametrize("concurrency", [2])
@pytest.mark.parametrize("server", [on(n + "-mtp", base=n) for n in NAMES])
def test_speedup(llmperf, server, concurrency):
    mtp = llmperf.run(concurrency=concurrency)
    mtp.assert_speedup_over(llmperf.run(concurrency=concurrency, server=llmperf.base))
"""

FLAGS = ["-p", "no:benchmark", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--llmperf-sim"]


@pytest.fixture
def night(pytester, monkeypatch, tmp_path_factory):  # type: ignore[no-untyped-def]
    for name in ("GITHUB_RUN_ID", "BUILDKITE_BUILD_ID", "CI_PIPELINE_ID", "LLMPERF_STORE"):
        monkeypatch.delenv(name, raising=False)
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.makeconftest(FLEET_CONFTEST)
    project.path.joinpath("test_suite.py").unlink()
    project.makepyfile(test_night=SUITE)
    return project


def pytest_run(project, *args: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *FLAGS, *args],
        cwd=project.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(project.path)},
    )


def finished(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    out, _ = process.communicate(timeout=timeout)
    return process.returncode, out


def cells(document: dict) -> dict[tuple[str, str], str]:  # type: ignore[type-arg]
    """(test, metric) -> outcome, and each test's own outcome under metric ''."""
    out = {}
    for gate in document["verdicts"]:
        out[(gate["test"], "")] = gate["outcome"]
        for verdict in gate["verdicts"]:
            out[(gate["test"], verdict["metric"])] = "judged"
    return out


@pytest.mark.slow
def test_three_shards_on_one_store_report_what_one_run_gives_and_a_killed_shard_is_named(night, store_url, capsys):  # type: ignore[no-untyped-def]
    code, out = finished(pytest_run(night, "--update-baselines"))
    assert code == 0, out
    code, out = finished(pytest_run(night, "--llmperf-report", "whole"))
    assert code == 0, out
    whole = json.loads((night.path / "whole" / "report.json").read_text())

    shards = [
        pytest_run(
            night,
            f"--llmperf-shard={k}/3",
            "--llmperf-store",
            store_url,
            "--llmperf-session-group",
            "g1",
            "--llmperf-report",
            f"shard{k}",
        )
        for k in (1, 2, 3)
    ]
    outputs = [finished(p) for p in shards]
    assert [code for code, _ in outputs] == [0, 0, 0], outputs
    assert all(f"shard {k}/3: 1 group(s)" in out for k, (_, out) in zip((1, 2, 3), outputs)), outputs
    capsys.readouterr()
    assert llmperf(["report", str(night.path / "night"), "--store", store_url, "--session-group", "g1"]) == 0
    said = capsys.readouterr().out
    assert "night g1: 3 of 3 shard(s) finished" in said
    joined = json.loads((night.path / "night" / "report.json").read_text())
    assert cells(joined) == cells(whole)  # every test and judged metric, each test's outcome
    assert sorted(joined["workers"]) == ["shard1", "shard2", "shard3"]

    # A shard killed mid-night: the others finish, the report names it and exits 3.
    shards = [
        pytest_run(night, f"--llmperf-shard={k}/3", "--llmperf-store", store_url, "--llmperf-session-group", "g2")
        for k in (1, 2, 3)
    ]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with psycopg.connect(store_url) as conn:
            started = conn.execute(
                "SELECT count(*) FROM llmperf_sessions WHERE session_group = 'g2' AND shard = 2"
            ).fetchone()[0]
        if started:
            break
        time.sleep(0.2)
    shards[1].send_signal(signal.SIGKILL)
    assert [finished(p)[0] for p in (shards[0], shards[2])] == [0, 0]
    shards[1].communicate()
    capsys.readouterr()
    assert llmperf(["report", str(night.path / "night2"), "--store", store_url, "--session-group", "g2"]) == 3
    said = capsys.readouterr().out
    assert "night g2: 2 of 3 shard(s) finished" in said
    assert "shard 2/3 did not finish: started" in said
