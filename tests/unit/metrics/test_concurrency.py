import pytest

from pytest_llmperf.metrics.concurrency import RUNNING, WAITING, gauge_total, reached

PAGE = f"""# HELP {RUNNING} Number of requests in model execution batches.
# TYPE {RUNNING} gauge
{RUNNING}{{engine="0",model_name="m"}} 12.0
{RUNNING}{{engine="1",model_name="m"}} 4.0
{RUNNING}_other 99.0
{WAITING}{{engine="0",model_name="m"}} 3.0
"""


def test_gauge_total_sums_engines_and_ignores_other_names():
    assert gauge_total(PAGE, RUNNING) == 16.0
    assert gauge_total(PAGE, WAITING) == 3.0
    assert gauge_total(PAGE, "vllm:kv_cache_usage_perc") is None
    assert gauge_total(f"{RUNNING} 7\n", RUNNING) == 7.0  # no labels
    assert gauge_total(f'{RUNNING}{{a="b"}} NaN\n', RUNNING) is None


def samples(*running, waiting=None, in_flight=None):  # in_flight None: the client did not say
    return [[0.5 * (i + 1), in_flight, r, waiting] for i, r in enumerate(running)]


def test_a_run_that_reached_its_concurrency_passes():
    seen = reached(samples(0, 32, 31, 30, 12), 32, 97)
    assert seen is not None
    assert (seen.peak, seen.mean, seen.target, seen.required, seen.samples) == (32, 21.0, 32, 28, 5)
    assert seen.shortfall() is None


@pytest.mark.parametrize(
    "concurrency, required",
    [(1, 1), (2, 1), (8, 7), (10, 9), (32, 28), (256, 230)],
)
def test_the_margin_is_ninety_percent_rounded_down(concurrency, required):
    seen = reached(samples(concurrency), concurrency, 10 * concurrency)
    assert seen is not None and seen.required == required


def test_exactly_at_the_margin_passes_one_below_is_invalid():
    assert reached(samples(28), 32, 64).shortfall() is None
    assert "at most 27 requests running at once" in reached(samples(27, 27, 26), 32, 64).shortfall()


def test_a_server_that_queues_says_max_num_seqs_and_what_to_do():
    message = reached(samples(8, 8, 8, waiting=24), 32, 128).shortfall()
    assert message == (
        "the server never ran the run's concurrency: at most 8 requests running at once (mean 8.0, 3 samples "
        "of vllm:num_requests_running), below 28, 90% of concurrency 32; up to 24 waited on the server "
        "meanwhile: it admits about 8 at a time (its --max-num-seqs, or the KV cache's room): start it with "
        "--max-num-seqs >= 32 (and the memory for it), or test at concurrency 8 or less"
    )


def test_none_waiting_points_at_the_path_to_the_server():
    message = reached(samples(3, 4, 4, waiting=0), 32, 128).shortfall()
    assert "none waited on the server: the requests did not reach it together" in message


def test_fewer_prompts_than_concurrency_are_judged_against_what_was_sent():
    ok = reached(samples(9, 10), 32, 10)
    assert ok is not None and (ok.target, ok.required, ok.shortfall()) == (10, 9, None)
    message = reached(samples(4, 4, waiting=6), 32, 10).shortfall()
    assert "below 9, 90% of the 10 requests sent, fewer than the concurrency 32;" in message
    assert "--max-num-seqs >= 10" in message


def test_nothing_to_judge_without_samples_or_with_a_gauge_that_never_moved():
    assert reached(None, 8, 20) is None
    assert reached([], 8, 20) is None
    assert reached(samples(5), 8, 0) is None
    # --disable-log-stats: the gauge stays 0 while requests are answered; it tells nothing
    assert reached(samples(0, 0, 0, waiting=0), 8, 20) is None


def test_a_low_peak_with_nothing_waiting_is_judged_only_where_the_client_had_the_requests_in_flight():
    # the client had 32 in flight at three samples, nothing waited, 20 ran: they did not arrive together
    assert "none waited" in reached(samples(20, 20, 19, waiting=0, in_flight=32), 32, 128).shortfall()
    # at one sample or two, a request between the client and the server's admission explains it
    assert reached(samples(2, 2, waiting=0, in_flight=4), 4, 12).shortfall() is None
    # every sample fell in the run's tail (the client had fewer than 28 left): a low peak shows nothing
    tail = reached(samples(20, 12, waiting=0, in_flight=20), 32, 128)
    assert tail is not None and (tail.peak, tail.loaded, tail.shortfall()) == (20, 0, None)
    # requests waited on the server at two samples: capped, whatever the client had in flight
    assert "--max-num-seqs >= 32" in reached(samples(8, 8, waiting=4, in_flight=12), 32, 128).shortfall()


def test_a_low_peak_with_nothing_waiting_is_not_held_against_a_run_whose_streams_stalled():
    # a stalled stream stays in flight at the client after the server finished generating it
    # (the stall is named beside the verdict instead): seen in CI, 4 in flight, at most 1 running
    assert "none waited" in reached(samples(1, 1, 0, waiting=0, in_flight=4), 4, 12).shortfall()
    assert reached(samples(1, 1, 0, waiting=0, in_flight=4), 4, 12, stalled=11).shortfall() is None
    # requests waiting on the server still show a cap, stalls or not
    capped = reached(samples(8, 8, waiting=4, in_flight=12), 32, 128, stalled=3)
    assert "--max-num-seqs >= 32" in capped.shortfall()


def test_one_sample_with_requests_waiting_is_a_step_between_arrival_and_admission_not_a_cap():
    # seen on the simulator under load: 2 of 4 admitted, 2 arriving, at the run's only sample
    assert reached(samples(2, waiting=2, in_flight=4), 4, 12).shortfall() is None
    assert "it admits about 2 at a time" in reached(samples(2, 2, waiting=2, in_flight=4), 4, 12).shortfall()


def test_waiting_gauge_absent():
    seen = reached(samples(2, 2, 2), 8, 20)
    assert seen is not None and seen.peak_waiting is None
    assert "none waited" in seen.shortfall()
    assert seen.to_dict()["peak"] == 2
