"""Issue 14, point 8: bad input is found before any server starts, in one line with the fix.

Markers, tolerance strings and keys, the dataset and baseline files are checked at
collection or when the session starts: each case here asserts the outcome (a usage
error, exit 4), the message a user reads, that it is one line with no traceback through
the plugin, and that no server was started. None of them runs a workload, so the file
takes seconds.
"""

from __future__ import annotations

import pytest

from tests.plugin_project import INI, run

# One test per case, on the project's tiny server: the suite's own tests would do too,
# but one test keeps each message about one thing.
ONE_TEST = """
import pytest
from conftest import BASE

@pytest.mark.parametrize("concurrency", [{concurrency}])
@pytest.mark.llmperf(server=BASE, {marker})
def test_one(llmperf, concurrency):
    llmperf.run(concurrency=concurrency).assert_no_regression("decode_tok_s")
"""


def one_test(project, marker="num_prompts=8, max_tokens=16, warmup=1", concurrency="2"):
    project.makepyfile(test_suite=ONE_TEST.format(marker=marker, concurrency=concurrency))


def refused(result, message):
    """A usage error whose one message line carries `message`, before any server started."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert "starting server" not in result.stdout.str()
    return errors[0]


# -- markers (each value's check: tests/unit/workload/test_workload.py) ------------------


@pytest.mark.parametrize(
    "marker, message",
    [
        ("warmup=-1", "warmup=-1: warmup (warm-up requests before the measured window) takes a whole number >= 0"),
        ("num_prompts=12.5", "num_prompts=12.5: num_prompts (measured requests) takes a whole number >= 1"),
        ("max_seconds=-5", "max_seconds=-5: max_seconds (the time cap) takes a number of seconds > 0, or None"),
        (
            "warmup={2: 1, 8: -1}",
            "warmup={2: 1, 8: -1}: the value for concurrency 8: warmup (warm-up requests before the measured window)",
        ),
        ("num_prompts={4: 8}", "num_prompts={4: 8} has no entry for concurrency 2 (add 2: ... or 'default': ...)"),
        ("num_prompt=8", "unknown @pytest.mark.llmperf argument(s) ['num_prompt']"),
    ],
)
def test_a_bad_workload_value_in_the_marker_is_a_usage_error_at_collection(project, marker, message):
    one_test(project, marker)
    line = refused(run(project), message)
    assert line.startswith("ERROR: test_suite.py::test_one[2]: ")


@pytest.mark.parametrize("concurrency, shown", [("0", "0"), ("'8'", "'8'")])
def test_a_bad_concurrency_parameter_is_a_usage_error_at_collection(project, concurrency, shown):
    one_test(project, concurrency=concurrency)
    line = refused(run(project), f"(its concurrency parameter): concurrency must be a whole number >= 1, got {shown}")
    assert line.startswith("ERROR: test_suite.py::test_one[")


# -- tolerances ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "tolerances, message",
    [
        ('{"decode_toks": "3%"}', "llmperf tolerances: unknown metric 'decode_toks'; did you mean decode_tok_s?"),
        ('{"decode_tok_s": "5 percent"}', "tolerance for decode_tok_s: invalid tolerance '5 percent'; accepted forms"),
        (
            '{"ttft_ms_median": "-5%"}',
            "tolerance for ttft_ms_median: '-5%' has the wrong sign: ttft_ms_median is lower-is-better, "
            "so a regression is a rise; write '5%' or '+5%'",
        ),
    ],
)
def test_a_bad_marker_tolerance_is_a_usage_error_at_collection(project, tolerances, message):
    one_test(project, f"num_prompts=8, tolerances={tolerances}")
    line = refused(run(project), message)
    assert line.startswith("ERROR: test_suite.py::test_one[2]: llmperf tolerances: ")


@pytest.mark.parametrize(
    "line, message",
    [
        ("decode_tokz = 5%", "ini llmperf_tolerances: tolerance override: unknown metric 'decode_tokz'; did you mean"),
        ("ttft_ms_median = -10%", "tolerance override for ttft_ms_median: '-10%' has the wrong sign"),
    ],
)
def test_a_bad_ini_tolerance_is_a_usage_error_at_configure(project, line, message):
    project.makeini(INI + f"    {line}\n")
    refused(run(project), message)
