"""Faults of the server and of the machine it is measured from (issue 14, points 1 and 9):
simulator flags given one at a time, a server that dies mid-run, too few file descriptors
for the concurrency. Each asserts on the outcome and on the message a user reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_llmperf
from tests.plugin_project import run

ROOT = Path(pytest_llmperf.__file__).resolve().parent.parent

# --------------------------------------------------------------------- --llmperf-sim-args


@pytest.mark.parametrize(
    "how",
    [
        ["--llmperf-sim-args", "--disable-log-stats"],  # one flag as the value: argparse's trap
        ["--llmperf-sim-args=--disable-log-stats"],
        ["-o", "addopts=--llmperf-sim-args --disable-log-stats"],
    ],
    ids=["one-flag", "equals", "addopts"],
)
def test_one_simulator_flag_as_the_value_reaches_the_simulator(project, how):
    result = run(project, "-k", "test_mtp", *how)
    result.assert_outcomes(failed=1, deselected=2)  # the flag took effect: acceptance has no data
    result.stdout.fnmatch_lines(
        ["*acceptance_rate: no data: spec-decode counters did not move*stats are disabled on the server*"]
    )
    assert "expected one argument" not in result.stderr.str()


def test_one_unknown_simulator_flag_is_a_usage_error_naming_it(project):
    result = run(project, "--llmperf-sim-args", "--sim-sed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-sim-args: unknown simulator flag --sim-sed*"])


def test_a_forgotten_value_is_still_a_usage_error_not_a_swallowed_flag(project):
    result = run(project, "--llmperf-sim-args", "--llmperf-profile=smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --llmperf-sim-args: expected one argument*"])


# ----------------------------------------------------------------------- a server that dies

# The engine dies on the 16th request: after the server's warm-up (8), the run's (1) and 6 measured.
CRASH = ["--llmperf-sim-args", "--sim-crash-after-requests 15"]


def test_a_server_that_died_mid_run_says_so_with_its_last_log_lines_whatever_the_budget(project):
    result = run(project, "-k", "test_base", *CRASH, "-o", "llmperf_error_budget=100%")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*decode_tok_s*INVALID RUN*",
            "  - invalid run: server died after * of 12 requests: /health answers 503; * of 12 failed: "
            "*x HTTP 500: EngineCore encountered an issue*; its last * log lines:",
            "    ERROR pytest_llmperf.sim: sim: engine dead (crash_after_requests=15); cutting * stream(s)",
        ]
    )
    result.stdout.fnmatch_lines(["note: tiny @ 4: server died after * of 12 requests: /health answers 503"])
    assert "Traceback" not in result.stdout.str()


def test_a_dead_server_is_never_recorded_nor_repeated_and_an_exited_one_gives_its_exit_code(project):
    result = run(project, "-k", "test_base", "--update-baselines", *CRASH[:1], CRASH[1] + " --sim-crash-exit")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*tiny @ concurrency 4: not recorded: invalid run: server died after * of 12 requests: "
            "the simulator process exited with code 1; *",
            "*engine dead (crash_after_requests=15)*",
            # Recording makes 5 runs; after the death none more: 12 requests, not 60.
            "tiny *4 */12, * failed*",
        ]
    )
    assert not list(project.path.rglob("baselines/**/*.json"))


def test_a_server_that_dies_during_its_warm_up_is_a_dead_server_not_a_traceback(project):
    dies = "--sim-crash-after-requests 6 --sim-crash-exit"  # within the server warm-up's 8 requests
    result = run(project, "-v", "-k", "test_base", "--llmperf-sim-args", dies)  # -v: each run's own lines
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*decode_tok_s*INVALID RUN*",
            "  - invalid run: server died during its warm-up (* of 8 failed): the simulator process exited "
            "with code 1; *",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "ServerUnreachable" not in result.stdout.str()
    assert "[llmperf] tiny @ concurrency 4: 12 prompts" not in result.stdout.str()  # nothing measured after it


def test_failed_requests_on_a_live_server_are_no_death(project):
    result = run(project, "-k", "test_base", "--llmperf-sim-args", "--sim-error-rate 0.3")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*invalid run: * of 12 failed: *x HTTP 500: Internal server error*"])
    assert "server died" not in result.stdout.str()


# ------------------------------------------------------------------ too many open files

WIDE = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=12, max_tokens=8, warmup=0)
def test_wide(llmperf):
    llmperf.run(concurrency=200).assert_no_regression("decode_tok_s")
"""

LIMITED_PYTEST = """
import resource, sys
import pytest
soft, hard = int(sys.argv[1]), int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
sys.exit(pytest.main(["-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-sim", *sys.argv[3:]]))
"""


def limited_run(project, soft: int, hard: int, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in the project's folder, in a process whose RLIMIT_NOFILE is (soft, hard)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", LIMITED_PYTEST, str(soft), str(hard), *args],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_too_few_file_descriptors_for_the_concurrency_fail_in_one_line_naming_the_limits_and_ulimit(project):
    project.makepyfile(test_suite=WIDE)
    result = limited_run(project, 64, 64)
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout + result.stderr
    out = result.stdout
    failure = out[out.index("test_suite.py::test_wide\n") :].splitlines()[1]
    assert failure == (
        "too many open files at concurrency 200 (each stream holds a socket): RLIMIT_NOFILE is soft 64, hard 64; "
        "raise it before pytest, e.g. `ulimit -n 4096` (above the hard limit: as root, or in "
        "/etc/security/limits.conf), or lower the concurrency"
    )
    assert "OSError" not in out and "Traceback" not in out and "load_verify_locations" not in out
    assert "FAILED test_suite.py::test_wide - too many open files at concurrency 200" in out  # the reason, not the id


def test_a_low_soft_limit_under_a_higher_hard_one_is_raised_for_the_run_and_says_so(project):
    project.makepyfile(test_suite=WIDE)
    # At the simulator's real-time speed the gaps between chunks are wide enough that a busy
    # host's event-loop lag cannot make this run invalid: what is tested is the file limit.
    result = limited_run(
        project, 64, 4096, "--update-baselines", "--llmperf-repetitions", "1", "--llmperf-sim-speed", "1"
    )
    assert result.returncode == pytest.ExitCode.OK, result.stdout + result.stderr
    assert (
        "[llmperf] open files: soft limit raised from 64 to 1024 for concurrency 200 (hard limit 4096), for this run"
        in result.stdout
    )
    assert "12/12" in result.stdout  # every request completed: the simulator raised its own limit too
