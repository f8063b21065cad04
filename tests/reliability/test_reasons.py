"""Point 5: each metric's no-data reason is its own; faults are named beside a regression."""

from tests.plugin_project import record, run

ACCEPTANCE_ON_BASE = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=12, max_tokens=48, warmup=1)
def test_base_acceptance(llmperf):
    llmperf.run(concurrency=4).assert_no_regression("decode_tok_s", "acceptance_rate")
"""


def row(out, name):
    return next(line for line in out.splitlines() if line.strip().startswith(name + " "))


def test_acceptance_on_a_base_server_says_it_is_not_speculative(project):
    project.makepyfile(test_suite=ACCEPTANCE_ON_BASE)
    result = run(project, "--update-baselines")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not recorded, no data: acceptance_rate: not a speculative-decoding server*"])


def test_frozen_counters_say_disable_log_stats_not_not_speculative(project, monkeypatch):
    record(project)
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--disable-log-stats")
    result = run(project, "-k", "test_mtp")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "NO DATA" in row(out, "acceptance_rate")
    assert "--disable-log-stats" in out and "not a speculative-decoding server" not in out


def test_malformed_stream_is_named_as_such_not_as_a_missing_speculative_server(project, monkeypatch):
    record(project)
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--sim-malformed-chunk-after 3 --sim-fault-request-rate 0.5")
    result = run(project, "-k", "test_mtp")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "INVALID RUN" in row(out, "acceptance_rate")
    assert "invalid run:" in out and "not a speculative-decoding server" not in out
    result.stdout.fnmatch_lines(["*of * failed: *x *"])


def test_stalled_streams_are_named_beside_the_regression_it_is_not_offered_for_re_recording(project, monkeypatch):
    record(project)
    # Every stream pauses 1.5 s (real time: the project runs the simulator at 4x) after
    # 10 chunks: decode throughput falls far beyond the project's 40 %.
    faults = "--sim-stall-seconds 6 --sim-stall-after-chunks 10"
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", faults)
    result = run(project, "-k", "test_mtp")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "REGRESSED" in row(out, "decode_tok_s")
    result.stdout.fnmatch_lines(["*faults during the run: * stalled (longest gap 1.* s, *x the median gap*"])
    assert "re-record decode_tok_s" not in out


def test_a_server_that_dies_in_its_warm_up_is_said_once_without_an_empty_count(project, monkeypatch):
    # The server warm-up (8 requests) kills it; no measured request was ever sent.
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--sim-crash-after-requests 3")
    result = run(project, "-k", "test_mtp", "--update-baselines")
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*invalid run: server died during its warm-up (* of 8 failed): /health answers 503; "
            "the figures of a broken run judge nothing*"
        ]
    )
    assert "0 of 0 failed" not in out and "failed: ;" not in out
