"""End to end on the simulator with a real PostgreSQL store: a session's rows, a store lost
mid-session (spooled, pushed once), an unreachable store at start, and `llmperf report`
joining a night's shards."""

from __future__ import annotations

import json

import psycopg
import pytest

from pytest_llmperf.commands.cli import main as llmperf
from tests.plugin_project import make_project, run

PASSWORD = "pw-never-shown-7Q"


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):  # type: ignore[no-untyped-def]
    for name in ("GITHUB_RUN_ID", "BUILDKITE_BUILD_ID", "CI_PIPELINE_ID", "LLMPERF_STORE"):
        monkeypatch.delenv(name, raising=False)
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    run(project, "--update-baselines").assert_outcomes(passed=3)
    return project


def with_password(url: str) -> str:
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


def count(url: str, table: str, where: str = "TRUE") -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0])


def files_text(folder) -> str:  # type: ignore[no-untyped-def]
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_session_writes_runs_verdicts_and_history_and_no_password_anywhere(project, store_url) -> None:  # type: ignore[no-untyped-def]
    history_file = project.path / "baselines" / "sim" / "history.jsonl"
    lines_before = history_file.read_text().count("\n")
    url = with_password(store_url)
    result = run(
        project,
        "--llmperf-store",
        url,
        "--llmperf-session-group",
        "night-1",
        "--llmperf-report",
        "rep",
        "--junitxml",
        "junit.xml",
    )
    result.assert_outcomes(passed=3)
    output = result.stdout.str() + result.stderr.str()
    assert "store postgresql://postgres:***@127.0.0.1" in output
    assert "row(s) written to postgresql://postgres:***@" in output
    assert PASSWORD not in output
    assert PASSWORD not in files_text(project.path)  # report, JUnit, baselines, history
    assert history_file.read_text().count("\n") == lines_before  # the history went to the store
    assert count(store_url, "llmperf_sessions", "session_group = 'night-1' AND finished_at IS NOT NULL") == 1
    assert count(store_url, "llmperf_runs") == 2  # tiny and tiny-mtp at concurrency 4
    verdicts = count(store_url, "llmperf_verdicts")
    history = count(store_url, "llmperf_history")
    assert verdicts >= 3 and history >= 3
    with psycopg.connect(store_url) as conn:
        (document,) = conn.execute("SELECT document FROM llmperf_sessions").fetchone()
    assert all("results" not in r for r in document["runs"])  # raw records stay in the report folder
    with psycopg.connect(store_url) as conn:
        stored = [r[0] for r in conn.execute("SELECT requests FROM llmperf_runs").fetchall()]
    assert all(len(rows) == 12 for rows in stored)  # each run's 12 requests, the lines the verdict rule pairs
    assert len(json.loads((project.path / "rep" / "report.json").read_text())["runs"][0]["results"]) >= 1

    # A second night reads the first from the store (the drift check and the confirmation).
    run(project, "--llmperf-store", store_url, "--llmperf-session-group", "night-2").assert_outcomes(passed=3)
    assert count(store_url, "llmperf_history") == 2 * history
    assert llmperf(["history", "--store", url, "--server", "tiny"]) == 0


def test_an_unreachable_store_stops_the_session_before_any_server_starts(project, postgres_server) -> None:  # type: ignore[no-untyped-def]
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{postgres_server.port + 1}/db"
    result = run(project, "--llmperf-store", url)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert f"--llmperf-store: store postgresql://postgres:***@127.0.0.1:{postgres_server.port + 1}/db" in err
    assert PASSWORD not in result.stdout.str() + err
    assert "starting server" not in result.stdout.str() and "collected" not in result.stdout.str()


class StopStoreAfterFirstTest:
    """The store's server stops once the first test has run, mid-session."""

    def __init__(self, server) -> None:  # type: ignore[no-untyped-def]
        self.server = server
        self.stopped = False

    def pytest_runtest_teardown(self, item) -> None:  # type: ignore[no-untyped-def]
        if not self.stopped:
            self.stopped = True
            self.server.stop()


def test_a_store_lost_mid_session_spools_its_rows_and_a_push_writes_them_once(
    project, store_url, postgres_server, capsys
) -> None:  # type: ignore[no-untyped-def]
    stopper = StopStoreAfterFirstTest(postgres_server)
    try:
        result = project.runpytest(
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "--llmperf-sim",
            "--llmperf-store",
            store_url,
            "--llmperf-session-group",
            "lost",
            "--llmperf-report",
            "rep",
            plugins=[stopper],
        )
    finally:
        if stopper.stopped:
            postgres_server.start()
    result.assert_outcomes(passed=3)  # the verdicts stand, judged from the baseline files
    out = result.stdout.str()
    assert "store NOT WRITTEN" in out and "spooled to" in out and "llmperf store push" in out
    spooled = list((project.path / "rep" / "store-spool").glob("*.json"))
    assert len(spooled) == 1
    assert count(store_url, "llmperf_sessions", "finished_at IS NULL") == 1  # its start was recorded
    assert count(store_url, "llmperf_runs") == 0

    capsys.readouterr()
    assert llmperf(["store", "push", str(project.path / "rep"), "--store", store_url]) == 0
    assert "pushed 1 session(s)" in capsys.readouterr().out
    rows = (count(store_url, "llmperf_runs"), count(store_url, "llmperf_verdicts"), count(store_url, "llmperf_history"))
    assert rows[0] == 2 and min(rows) > 0
    assert count(store_url, "llmperf_sessions", "finished_at IS NOT NULL") == 1

    # Pushed again (a retry, or a copy of the spool): not one row more.
    pushed = project.path / "rep" / "store-spool" / "pushed" / spooled[0].name
    pushed.replace(spooled[0])
    assert llmperf(["store", "push", str(project.path / "rep"), "--store", store_url]) == 0
    assert "0 new row(s)" in capsys.readouterr().out
    assert (
        count(store_url, "llmperf_runs"),
        count(store_url, "llmperf_verdicts"),
        count(store_url, "llmperf_history"),
    ) == rows

    # The next session with that report folder pushes what is still spooled, before it starts anything.
    pushed.replace(spooled[0])
    nxt = run(project, "-k", "test_base", "--llmperf-store", store_url, "--llmperf-report", "rep")
    nxt.assert_outcomes(passed=1)
    assert "store: pushed 1 spooled session(s)" in nxt.stdout.str() and "(0 new row(s))" in nxt.stdout.str()
    assert not list((project.path / "rep" / "store-spool").glob("*.json"))
    assert count(store_url, "llmperf_sessions", "finished_at IS NOT NULL") == 2


def test_a_recorded_night_writes_the_baseline_files_back_from_the_store(project, store_url, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    run(project, "--update-baselines", "--llmperf-store", store_url, "--llmperf-session-group", "rec").assert_outcomes(
        passed=3
    )
    written = {p.relative_to(project.path): p.read_text() for p in (project.path / "baselines").rglob("*.json")}
    assert written
    capsys.readouterr()
    checkout = tmp_path / "checkout"
    assert llmperf(["baselines", "--store", store_url, "--session-group", "rec", "--write", str(checkout)]) == 0
    again = {p.relative_to(checkout): p.read_text() for p in checkout.rglob("*.json")}
    assert again == written  # byte for byte, at the same paths
    assert "(shard 1)" in capsys.readouterr().out
