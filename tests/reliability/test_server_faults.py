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
