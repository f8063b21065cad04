"""Points 7 and 9: `kill -9` of a session leaves no simulator; baseline files keep their
mode, stray temp files of a killed write go at the next write and git ignores them;
--llmperf-sim-args with a target that would drop it is refused before anything starts."""

from __future__ import annotations

import os
import stat
import subprocess
import time

import pytest

from tests.plugin_project import run
from tests.reliability.test_signals import LONG, Session, simulators


def test_kill_9_of_a_session_leaves_no_simulator_behind(project):
    project.makepyfile(test_suite=LONG)
    session = Session(project.path, "-v", "-o", "llmperf_sim_speed=1")  # -v: each run's own lines
    session.wait_for("@ concurrency 4: 40 prompts")
    assert simulators(), "the simulator should be running mid-run"
    session.proc.kill()  # SIGKILL: no handler of ours runs
    session.proc.wait(10)
    deadline = time.monotonic() + 10
    while simulators() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not simulators(), "the simulator outlived the session that started it"


def test_baseline_files_keep_a_plain_mode_and_a_killed_writes_temp_file_goes_at_the_next_write(project):
    old = os.umask(0o022)
    try:
        run(project, "-k", "test_base", "--update-baselines").assert_outcomes(passed=1, deselected=2)
        folder = project.path / "baselines" / "sim"
        baseline = folder / "tiny.json"
        assert stat.S_IMODE(baseline.stat().st_mode) == 0o644  # not mkstemp's 0600
        stray = folder / ".tiny.json.k3j9x2.tmp"  # what a write killed before its rename leaves
        stray.write_text("{")
        run(project, "-k", "test_base", "--update-baselines").assert_outcomes(passed=1, deselected=2)
        assert not stray.exists() and stat.S_IMODE(baseline.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_git_ignores_the_temp_files_of_an_interrupted_write():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isdir(os.path.join(root, ".git")):
        pytest.skip("not a git checkout")
    found = subprocess.run(
        ["git", "check-ignore", "-q", "baselines/sim/.qwen3.6-27b-fp8.json.k3j9x2.tmp"], cwd=root, check=False
    )
    assert found.returncode == 0, "the .gitignore should match a stray baseline temp file"


@pytest.mark.parametrize("target", [["--llmperf-docker"], ["--llmperf-base-url", "http://127.0.0.1:9"]])
def test_simulator_flags_with_a_target_that_would_drop_them_are_refused_before_anything_starts(project, target):
    result = project.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", *target, "--llmperf-sim-args=--sim-error-rate 0.1"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-sim-args only applies to the simulated server (--llmperf-sim)*"])
    assert "starting server" not in result.stdout.str()


def test_a_read_only_baseline_file_is_never_replaced_and_says_so_before_any_server_starts(project):
    run(project, "-k", "test_base", "--update-baselines").assert_outcomes(passed=1, deselected=2)
    baseline = project.path / "baselines" / "sim" / "tiny.json"
    before = baseline.read_text()
    baseline.chmod(0o444)
    result = run(project, "-k", "test_base", "--update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: baseline baselines/sim/tiny.json cannot be written: it is read-only (mode 444); make it writable*"]
    )
    assert "warm-up" not in result.stdout.str()  # no server started
    assert baseline.read_text() == before and stat.S_IMODE(baseline.stat().st_mode) == 0o444


def test_an_unwritable_baselines_folder_is_found_before_any_server_starts(project):
    (project.path / "blocker").write_text("a file where the baselines folder would go\n")
    result = run(project, "-k", "test_base", "--update-baselines", "--llmperf-baselines-dir=blocker/baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: baseline blocker/baselines/sim/tiny.json cannot be written: *blocker*"])
    assert "warm-up" not in result.stdout.str() and "Traceback" not in result.stdout.str()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder whatever its mode")
def test_a_folder_without_write_permission_is_found_before_any_server_starts(project):
    (project.path / "baselines").mkdir()
    (project.path / "baselines").chmod(0o555)
    result = run(project, "-k", "test_base", "--update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: baseline baselines/sim/tiny.json cannot be written: no file can be written*"])
