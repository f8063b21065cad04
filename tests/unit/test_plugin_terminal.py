"""What the terminal says, end to end with pytester (tests/plugin_project.py): progress in
real time and agreeing with the result, the simulator profile in the header, no "started"
for an endpoint nobody starts, a failing test's verdict as its short summary line (and in
CI: JUnit properties, the GitHub step summary), pytest-benchmark only when asked."""

import functools
import json
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.server import simulated_server
from tests.plugin_project import make_project, record, run


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)


@pytest.fixture
def chatty_progress(monkeypatch):
    """The progress line from the start, every 50 ms (a run of the tiny project is shorter
    than its default 3 s of quiet)."""
    from pytest_llmperf.workload import runner

    often = functools.partial(runner.RunTuning, progress_quiet_seconds=0.0, progress_interval=0.05)
    monkeypatch.setattr(runner, "RunTuning", often)


def last_progress(capsys):
    """The last progress line: written live past the inner session's capture, so caught by
    this test's own."""
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("llmperf: ")]
    assert lines
    return lines[-1]


def summary_row(result, server):
    """The cells of the summary's measured row for `server` at concurrency 4."""
    return next(line.split() for line in result.stdout.lines if re.match(rf"{server}\s+4\s+\d+/\d+", line))


def test_the_progress_line_is_in_real_time_as_the_summary_is(project, chatty_progress, capsys):
    result = run(project, "-k", "test_base", "-o", "llmperf_sim_speed=10")
    line = last_progress(capsys)
    assert line.startswith("llmperf: tiny @ concurrency 4: 12/12 done, 0 failed, ") and line.endswith(
        "(x10 clock, tok/s in real time)"
    )
    rate = float(re.search(r"failed, ([\d,]+) output tok/s", line)[1].replace(",", ""))
    decode = float(summary_row(result, "tiny")[3])  # server, conc, completed, decode tok/s
    assert abs(rate - decode) <= 0.5, (line, decode)  # not ten times it


def test_the_progress_line_and_the_result_agree_on_failures(project, chatty_progress, capsys):
    # Broken SSE bodies arrive with HTTP 200: they look fine until decoded after the window.
    faults = "--sim-malformed-chunk-after 2 --sim-fault-request-rate 0.5"
    result = run(project, "-k", "test_base", "--llmperf-sim-args", faults, "--llmperf-error-budget", "100%")
    failed = int(re.match(r"llmperf: tiny @ concurrency 4: 12/12 done, (\d+) failed, ", last_progress(capsys))[1])
    assert failed > 0
    assert " ".join(summary_row(result, "tiny")[2:5]) == f"{12 - failed}/12, {failed} failed"


def test_the_header_names_the_simulator_profile_each_server_runs_with(project):
    result = run(project, "--collect-only")
    result.stdout.fnmatch_lines(
        ["[[]llmperf[]] simulator profile generic (no profile fitted to these models: *): tiny, tiny-mtp"]
    )
    only_base = run(project, "--collect-only", "-k", "test_base")  # the servers that will run
    only_base.stdout.fnmatch_lines(["[[]llmperf[]] simulator profile generic (*): tiny"])


def test_an_endpoint_someone_else_runs_is_used_never_said_to_start_or_stop(project):
    with simulated_server(SimConfig(model="org/tiny", speed=4), mode="process") as url:
        result = project.runpytest(
            "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-base-url", url, "-k", "test_base"
        )
    out = result.stdout.str()
    assert "starting server" not in out and "stopping server" not in out and "servers started" not in out
    result.stdout.fnmatch_lines(
        [
            f"[[]llmperf[]] server tiny: using {url} (external: run by someone else)",
            "servers used (run by someone else, none started here): tiny",
        ]
    )


def test_in_ci_a_failing_test_reads_as_its_verdict_in_the_short_summary_junit_and_the_step_summary(
    project, monkeypatch
):
    record(project)
    step_summary, junit = project.path / "step-summary.md", project.path / "junit.xml"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    monkeypatch.setenv("CI", "true")  # pytest then prints short summary messages whole, not cut to the width
    result = run(project, "--llmperf-sim-args", "--sim-acceptance-scale 0.6", "-rf", "--junitxml", str(junit))
    short = [line for line in result.stdout.lines if line.startswith("FAILED test_suite.py::test_mtp[4]")]
    assert len(short) == 1, result.stdout.str()
    verdict = short[0].split(" - ", 1)[1]
    assert re.search(r"acceptance_rate \d\.\d{3} -> \d\.\d{3} \(-\d\.\d{3}\) regressed", verdict), verdict
    after = result.stdout.lines[result.stdout.lines.index(short[0]) + 1]
    assert after.startswith(("FAILED", "=")), after  # one line: not the table

    case = next(c for c in ET.parse(junit).iter("testcase") if c.get("name") == "test_mtp[4]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["llmperf.tiny-mtp@4.acceptance_rate.verdict"] == "regressed"
    assert props["llmperf.tiny-mtp@4.outcome"] == "fail"
    assert float(props["llmperf.tiny-mtp@4.decode_tok_s"]) > 0
    assert case.find("failure").get("message") == verdict
    assert "REGRESSED" in case.find("failure").text  # the table stays the body

    text = step_summary.read_text()
    assert text.startswith("earlier step\n") and text.count("# pytest-llmperf report") == 1
    assert "### FAIL: tiny-mtp @ 4: test_suite.py::test_mtp[4]" in text
    assert re.search(r"^\| acceptance_rate \| .* \| \*\*regressed\*\* \|$", text, re.M), text


def test_pytest_benchmark_shows_its_table_only_when_asked_and_gets_the_runs_then(project, monkeypatch):
    pytest.importorskip("pytest_benchmark")
    # pytest-benchmark turns itself off in a pytest-xdist worker, read from this variable: the
    # in-process run below is no worker when this test runs in one (pytest -n).
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    args = ["-p", "no:cacheprovider", "--llmperf-sim", "--update-baselines", "-k", "test_base"]
    quiet = project.runpytest(*args)
    quiet.assert_outcomes(passed=1, deselected=2)
    assert "benchmark: 1 tests" not in quiet.stdout.str() and "Name (time in" not in quiet.stdout.str()

    asked = project.runpytest(*args, "--benchmark-json", "bench.json")
    asked.assert_outcomes(passed=1, deselected=2)
    asked.stdout.fnmatch_lines(["*benchmark: 1 tests*"])
    bench = json.loads((project.path / "bench.json").read_text())
    (entry,) = bench["benchmarks"]
    assert entry["extra_info"]["llmperf_server"] == "tiny"
    assert entry["extra_info"]["llmperf_metrics"]["decode_tok_s"] > 0
    assert bench["machine_info"]["llmperf_target"] == "sim"
