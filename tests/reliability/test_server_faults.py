"""Faults of the server and of the machine it is measured from (issue 14, points 1 and 9):
simulator flags given one at a time, a server that dies mid-run, too few file descriptors
for the concurrency. Each asserts on the outcome and on the message a user reads.
"""

from __future__ import annotations

import pytest

from tests.plugin_project import run

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

CRASH = ["--llmperf-sim-args", "--sim-crash-after-requests 6"]  # the engine dies on the 7th request


def test_a_server_that_died_mid_run_says_so_with_its_last_log_lines_whatever_the_budget(project):
    result = run(project, "-k", "test_base", *CRASH, "-o", "llmperf_error_budget=100%")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*decode_tok_s*INVALID RUN*",
            "  - invalid run: server died after * of 12 requests: /health answers 503; * of 12 failed: "
            "*x HTTP 500: EngineCore encountered an issue*; its last * log lines:",
            "    ERROR pytest_llmperf.sim: sim: engine dead (crash_after_requests=6); cutting * stream(s)",
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
            "*engine dead (crash_after_requests=6)*",
            # Recording makes 5 runs; after the death none more: 12 requests, not 60.
            "tiny *4 */12, * failed*",
        ]
    )
    assert not list(project.path.rglob("baselines/**/*.json"))


def test_failed_requests_on_a_live_server_are_no_death(project):
    result = run(project, "-k", "test_base", "--llmperf-sim-args", "--sim-error-rate 0.3")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*invalid run: * of 12 failed: *x HTTP 500: Internal server error*"])
    assert "server died" not in result.stdout.str()
