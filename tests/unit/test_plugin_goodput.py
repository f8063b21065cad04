"""Goodput at SLOs end to end with pytester against the simulated server
(tests/plugin_project.py): the marker's slos= and --llmperf-slos, the figures in the
terminal table and the baseline, and bad SLO text stopping collection before any server
starts. The SLOs are chosen so every request meets them or none can (TTFT 0 ms), which
no timing noise moves."""

import json

import pytest

from tests.plugin_project import make_project, run

SUITE = """
import pytest
from conftest import BASE

W = dict(num_prompts=12, max_tokens=48, warmup=1)

# Goodput is a timing figure: the project's loose timing tolerance (this machine is shared).
@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=BASE, tolerances={"request_goodput": "40%"}, **W)
def test_session_slos(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    assert run.workload.slos in ("e2el:600000", "e2el:500000")  # --llmperf-slos
    assert run.value("slo_attainment") == 1.0
    assert run.value("request_goodput") == run.value("request_throughput") > 0
    run.assert_no_regression("slo_attainment", "request_goodput")

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=BASE, slos="ttft:0", **W)
def test_marker_slos(llmperf, concurrency):
    run = llmperf.run(concurrency=concurrency)
    assert run.workload.slos == "ttft:0"  # the marker's wins over the session's
    assert run.value("slo_attainment") == 0.0 and run.value("request_goodput") == 0.0
"""


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    project = make_project(pytester, monkeypatch, tmp_path_factory)
    project.makepyfile(test_suite=SUITE)
    return project


def test_goodput_at_slos_is_in_the_table_and_the_baseline_and_judged(project):
    recorded = run(project, "--llmperf-slos", "e2el:600000", "--update-baselines")
    recorded.assert_outcomes(passed=2)
    out = recorded.stdout.str()
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("server ") and "conc" in line)
    assert lines[at].split()[-4:] == ["goodput", "req/s", "SLO", "met"]
    rows = [line.split() for line in lines[at + 2 : at + 4]]  # the measured table's two runs
    assert sorted(row[-1] for row in rows) == ["0.000", "1.000"]  # SLO met
    assert sorted(row[-2] for row in rows)[0] == "0.000" and float(sorted(row[-2] for row in rows)[1]) > 0
    assert "goodput SLOs (ms) e2el:600000: tiny @ 4" in out
    assert "goodput SLOs (ms) ttft:0: tiny @ 4" in out

    baseline = json.loads((project.path / "baselines" / "sim" / "tiny.json").read_text())
    entries = baseline["concurrency"]["4"]
    (key,) = [k for k in entries if "slos=e2el:600000" in k]
    assert entries[key]["workload"]["slos"] == "e2el:600000"
    assert entries[key]["metrics"]["slo_attainment"]["value"] == 1.0
    assert entries[key]["metrics"]["request_goodput"]["value"] > 0

    judged = run(project, "--llmperf-slos", "e2el:600000", "-k", "test_session_slos")
    judged.assert_outcomes(passed=1, deselected=1)
    judged.stdout.fnmatch_lines(["*slo_attainment*1.000*1.000*pass*"])

    # Other SLOs are another workload: the baseline at e2el:600000 is not compared with them.
    other = run(project, "--llmperf-slos", "e2el:500000", "-k", "test_session_slos")
    other.assert_outcomes(failed=1, deselected=1)
    other.stdout.fnmatch_lines(["*no entry for this workload*", "*slos*e2el:600000*e2el:500000*"])


BAD_MARKER = """
import pytest
from conftest import BASE

@pytest.mark.parametrize("concurrency", [4])
@pytest.mark.llmperf(server=BASE, num_prompts=4, slos="ttfb:500 tpot:50")
def test_typo(llmperf, concurrency):
    llmperf.run(concurrency=concurrency)
"""


@pytest.mark.parametrize(
    "suite, args, message",
    [
        (
            BAD_MARKER,
            (),
            "*test_typo*slos='ttfb:500 tpot:50': slos (the SLOs goodput is judged at) takes KEY:VALUE pairs in ms*"
            "unknown SLO 'ttfb' in 'ttfb:500'; did you mean ttft?*",
        ),
        (BAD_MARKER.replace('slos="ttfb:500 tpot:50"', "slo='ttft:500'"), (), "*did you mean slos?*"),
        (SUITE, ("--llmperf-slos", "ttft:500ms"), "*--llmperf-slos: 'ttft:500ms': '500ms' is not a number*"),
    ],
)
def test_bad_slos_stop_the_session_before_any_server_starts(project, suite, args, message):
    project.makepyfile(test_suite=suite)
    result = run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "servers started" not in result.stdout.str()
