from pytest_llmperf.metrics.timescale import to_real_time


def test_sped_up_clock_is_scaled_back_and_ratios_are_untouched():
    fast = {
        "duration_s": 10.0,
        "decode_tok_s": 4000.0,
        "total_tok_s": 5000.0,
        "request_throughput": 2.0,
        "ttft_ms_median": 62.4,
        "tpot_ms_p99": 7.0,
        "acceptance_rate": 0.67,
        "completed": 118,
        "acceptance_length": 3.0,
        "total_output_tokens": 30000,
        "spec_status": "ok",
        "ttft_ms_mean": None,
    }
    real = to_real_time(fast, 10.0)
    assert real["duration_s"] == 100.0 and real["decode_tok_s"] == 400.0 and real["total_tok_s"] == 500.0
    assert real["request_throughput"] == 0.2 and real["ttft_ms_median"] == 624.0 and real["tpot_ms_p99"] == 70.0
    for unchanged in (
        "acceptance_rate",
        "completed",
        "acceptance_length",
        "total_output_tokens",
        "spec_status",
        "ttft_ms_mean",
    ):
        assert real[unchanged] == fast[unchanged]
    assert to_real_time(fast, 1.0) == fast
