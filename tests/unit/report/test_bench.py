"""`llmperf bench`'s block, laid out as `vllm bench serve` prints its result."""

from dataclasses import replace

from pytest_llmperf.report.bench import serving_result
from tests.unit.commands.test_cli import seed_like_result


def value(text, label):
    """The value printed beside `label`, in vLLM's layout: the label padded to 40 columns."""
    (line,) = [line for line in text.splitlines() if line.startswith(label)]
    assert line[:41] == f"{label:<40} ", line
    return line[41:]


def test_the_block_has_vllms_labels_totals_and_mean_median_p90_p99_rows():
    text = serving_result(seed_like_result())
    lines = text.splitlines()
    assert lines[0] == "Completed 2/500, 0 errors (hit the 300 s cap)"  # the seeds' line, why it stopped
    assert lines[1] == "============ Serving Benchmark Result ============"
    assert lines[-1] == "=" * 50
    assert value(text, "Successful requests:") == "2" and value(text, "Failed requests:") == "0"
    assert value(text, "Maximum request concurrency:") == "8"
    assert value(text, "Benchmark duration (s):") == "20.00"
    assert value(text, "Total input tokens:") == "500" and value(text, "Total generated tokens:") == "512"
    assert value(text, "Output token throughput (tok/s):") == "25.60"  # 512 output tokens / 20 s: the decode figure
    assert value(text, "Input token throughput (tok/s):") == "25.00"  # 500 prompt tokens / 20 s: the prefill one
    assert value(text, "Median TPOT (ms):") == "67.00"  # median of 66 and 68
    assert value(text, "Median TTFT (ms):") == "650.00"  # median of 600 and 700
    for header in ("Time to First Token", "Time per Output Token (excl. 1st token)", "Inter-token Latency"):
        assert f"{header:-^50}" in lines
    for name in ("TTFT", "TPOT", "ITL", "E2EL"):
        assert [
            line.split(" (ms)")[0] for line in lines if line.endswith(tuple("0123456789")) and f" {name} " in line
        ] == [f"{stat} {name}" for stat in ("Mean", "Median", "P90", "P99")]


def test_the_speculative_lines_are_vllms():
    text = serving_result(seed_like_result())
    assert f"{'Speculative Decoding':-^50}" in text.splitlines()
    assert value(text, "Acceptance rate (%):") == "67.00"  # 201 accepted of 300 drafted
    assert value(text, "Acceptance length:") == "3.01"  # 1 + 201 / 100 drafts
    assert (value(text, "Drafts:"), value(text, "Draft tokens:"), value(text, "Accepted tokens:")) == (
        "100",
        "300",
        "201",
    )
    assert "Per-position acceptance (%):" in text
    assert [value(text, f"  Position {i}:") for i in range(3)] == ["84.00", "66.00", "51.00"]


def test_errors_and_why_acceptance_is_missing_follow_the_block():
    text = serving_result(seed_like_result(stop_reason="completed", failed=1))
    assert text.splitlines()[0] == "Completed 2/500, 1 errors in 20 s (no time cap hit)"
    assert value(text, "Failed requests:") == "1"
    assert text.splitlines()[-1] == "Error: HTTP 500: boom"

    r = seed_like_result()
    r.metrics_after = r.metrics_before  # counters frozen while 512 tokens were generated
    text = serving_result(r)
    assert value(text, "Acceptance rate (%):").startswith("n/a")
    assert "512 tokens" in text and "--disable-log-stats" in text
    r.metrics_before = r.metrics_after = "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 5\n"
    assert "Speculative Decoding" not in serving_result(r)  # as vLLM: no section without speculation


def test_a_reasoning_run_has_its_ttfa_block_and_a_plain_one_none():
    result = seed_like_result()
    assert "Time to First Answer Token" not in serving_result(result)
    result.records = [replace(r, reasoning_chunks=3, reasoning_tokens=200) for r in result.records]
    result.records[0].first_answer_time = result.records[0].send_time + 9.0
    text = serving_result(result)
    lines = text.splitlines()
    assert lines.index(f"{'Time to First Answer Token':-^50}") > lines.index(f"{'End-to-end Latency':-^50}")
    assert value(text, "Median TTFA (ms):") == "9000.00"
    assert value(text, "Requests that answered:") == "1/2"
    assert value(text, "Reasoning tokens:") == "400" and value(text, "Answer tokens:") == "112"
    assert value(text, "Reasoning share (%):") == "78.12"  # 400 of 512


def test_goodput_lines_follow_the_request_throughput_only_where_slos_were_given():
    plain = serving_result(seed_like_result())
    assert "goodput" not in plain.lower() and "SLO" not in plain
    result = seed_like_result()
    result.config["slos"] = "ttft:650 tpot:67"  # request 0 (TTFT 600 ms, TPOT 66 ms) meets both; 1 does not
    text = serving_result(result)
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("Request throughput (req/s):")))
    assert lines[at + 1].startswith("Request goodput (req/s):")
    assert value(text, "Request goodput (req/s):") == "0.05"  # 1 good request / 20 s
    assert value(text, "SLO attainment (%):") == "50.00"
    assert value(text, "Goodput SLOs (ms):") == "ttft:650 tpot:67"


def test_the_three_token_counts_follow_the_block_and_a_mismatch_is_a_warning():
    def with_counter(delta):
        r = seed_like_result(stop_reason="completed")
        counter = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} '
        r.metrics_before += counter + "1000\n"
        r.metrics_after += counter + f"{1000 + delta}\n"
        return serving_result(r).splitlines()

    agree = with_counter(512)  # two requests of 256 tokens, two token events each (a sped-up fixture)
    assert "Output tokens: usage 512, vllm:generation_tokens_total +512, 4 token events" in agree
    assert not [line for line in agree if line.startswith("Warning:")]
    (warning,) = [line for line in with_counter(600) if line.startswith("Warning:")]
    assert warning.startswith(
        "Warning: output tokens disagree: usage 512 output tokens, vllm:generation_tokens_total +600 over the window"
    )
    assert "another client used the server during the run" in warning
    assert not [line for line in serving_result(seed_like_result()).splitlines() if "Output tokens:" in line]
