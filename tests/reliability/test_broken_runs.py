"""Point 1: a broken run never passes and is never recorded; the verdict names the cause."""

from pytest_llmperf.metrics.failures import ErrorBudget, failures
from pytest_llmperf.workload.runner import RunConfig, run_benchmark
from tests.plugin_project import record, run
from tests.unit.workload.stream_fakes import FakeStreamServer, scripted_requests

MTP_ONLY = ["-k", "test_mtp"]


def baseline_files(project):
    folder = project.path / "baselines"
    return sorted(p.name for p in folder.rglob("*.json")) if folder.exists() else []


def test_failing_requests_make_the_run_invalid_recorded_never_and_passed_never(project):
    faulty = ["--llmperf-sim-args", "--sim-error-rate 0.3", "-k", "test_base"]
    result = run(project, *faulty, "--update-baselines")
    result.assert_outcomes(failed=1, deselected=2)
    expected = "*tiny @ concurrency 4: not recorded: invalid run: * of 12 failed: *x HTTP 500: Internal server error*"
    result.stdout.fnmatch_lines([expected])
    assert baseline_files(project) == []

    record(project)
    result = run(project, *faulty)
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*decode_tok_s*INVALID RUN*", "*invalid run: * of * failed*"])
    assert "re-record" not in result.stdout.str()
    result = run(project, *faulty, "-o", "llmperf_error_budget=100%", "--llmperf-inconclusive=pass")
    assert "INVALID RUN" not in result.stdout.str()  # a budget that allows them: judged as usual


def test_a_crashed_mtp_server_is_an_invalid_run_not_a_decode_regression(project, monkeypatch):
    record(project)
    monkeypatch.setenv("TINY_MTP_SIM_ARGS", "--sim-crash-after-requests 5")
    result = run(project, *MTP_ONLY, "--update-baselines")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["*tiny-mtp @ concurrency 4: not recorded: invalid run: * of * failed*"])
    result = run(project, *MTP_ONLY)
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    assert "acceptance_rate" in out and "INVALID RUN" in out
    assert "REGRESSED" not in out and "re-record" not in out


def test_no_request_completed_reads_invalid_on_every_metric_even_within_the_budget(project):
    record(project)
    args = ["--llmperf-sim-args", "--sim-error-rate 1.0", "-o", "llmperf_error_budget=100%", *MTP_ONLY]
    result = run(project, *args)
    result.assert_outcomes(failed=1, deselected=2)
    out = result.stdout.str()
    for name in ("decode_tok_s", "acceptance_rate"):
        row = next(line for line in out.splitlines() if line.strip().startswith(name))
        assert "INVALID RUN" in row, row
    assert "no request completed (12 of 12 failed: 12x HTTP 500" in out


def test_requests_cut_at_the_time_cap_are_counted_apart_and_do_not_spend_the_budget():
    with FakeStreamServer() as server:
        res = run_benchmark(
            server.base_url,
            "m",
            scripted_requests("stall n=5", 6),
            RunConfig(concurrency=3, max_seconds=0.3, grace_seconds=0.2, warmup_requests=0, progress=False),
        )
    found = failures(res.records, res.attempted)
    assert (found.attempted, found.failed, found.cut_at_cap) == (3, 0, 3)
    assert ErrorBudget(0).allows(found.failed, found.attempted)


CAPPED = """
import pytest
from conftest import BASE

@pytest.mark.llmperf(server=BASE, num_prompts=8, max_tokens=96, warmup=0)
def test_base_at_8(llmperf):
    llmperf.run(concurrency=8).assert_no_regression("decode_tok_s")
"""


def test_a_server_that_runs_fewer_than_the_concurrency_is_invalid_and_says_max_num_seqs(project):
    """The tiny server declares --max-num-seqs 8; the simulator's own flag, given after it,
    caps it at 2: a test at concurrency 8 measured batches of 2, and says so."""
    project.makepyfile(test_suite=CAPPED)
    result = run(project, "--llmperf-sim-args", "--max-num-seqs 2", "--update-baselines", "-v")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tiny @ concurrency 8: not recorded: invalid run: the server never ran the run's concurrency: "
            "at most 2 requests running at once (mean *, * samples of vllm:num_requests_running), below 7, "
            "90% of concurrency 8; up to * waited on the server meanwhile: it admits about 2 at a time "
            "(its --max-num-seqs, or the KV cache's room): start it with --max-num-seqs >= 8*",
        ]
    )
    assert baseline_files(project) == []
    # the warm-ups before it, with their own figures: 8 at once on the fresh server, no run warm-up
    result.stdout.fnmatch_lines(["warm-up (not measured)*", "tiny*server*8*"])


def test_chunks_that_arrive_in_bursts_of_buffered_data_make_the_run_invalid(project):
    """A proxy holding the stream's chunks and passing them on 4 at a time: their arrival
    times are not when they were made, so nothing measured from them is judged."""
    buffered = ["--llmperf-sim-args", "--sim-burst-chunks 4", "-k", "test_base"]
    result = run(project, *buffered, "--update-baselines")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*tiny @ concurrency 4: not recorded: invalid run: *% of the gaps between chunks were 0 (bound 25%): "
            "chunks arrived in bursts of already-buffered data*"
        ]
    )
    assert baseline_files(project) == []
