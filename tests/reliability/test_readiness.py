"""Point 4: every target waits for readiness up to --llmperf-ready-timeout; a server
serving another model fails at once, naming what it serves."""

import time

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.server import simulated_server
from tests.plugin_project import run


def test_a_slow_starting_simulator_is_waited_for_and_no_request_meets_a_503(project):
    result = run(project, "-k", "test_base", "--update-baselines", "--llmperf-sim-args", "--sim-slow-start-seconds 2")
    result.assert_outcomes(passed=1, deselected=2)
    summary = result.stdout.str().split("llmperf summary")[1]
    assert "HTTP 503" not in summary and "failed" not in summary


def test_a_simulator_slower_than_the_ready_timeout_fails_naming_the_server_and_the_option(project):
    args = ["-k", "test_base", "--llmperf-ready-timeout", "1", "--llmperf-sim-args", "--sim-slow-start-seconds 600"]
    result = run(project, *args)
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*server tiny (sim) did not start: * not ready after 1 s (--llmperf-ready-timeout)*"])


def test_an_external_server_serving_another_model_fails_at_once_naming_it(project):
    with simulated_server(SimConfig(model="other/model", speed=4), mode="process") as url:
        started = time.monotonic()
        result = run_external(project, url, "--llmperf-ready-timeout", "600")
        took = time.monotonic() - started
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*serves [[]'other/model'], not 'org/tiny'*"])
    assert took < 30  # at once, not after the ready timeout


def test_an_external_server_still_loading_is_waited_for(project):
    with simulated_server(SimConfig(model="org/tiny", speed=4, slow_start_seconds=2), mode="process") as url:
        result = run_external(project, url, "--update-baselines")
    result.assert_outcomes(passed=1, deselected=2)


def run_external(project, url, *args):
    return project.runpytest(
        "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-base-url", url, "-k", "test_base", *args
    )
