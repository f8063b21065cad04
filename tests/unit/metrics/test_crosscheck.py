"""Token accounting and output lines on known records and pages (metrics/crosscheck.py)."""

import pytest

from pytest_llmperf.metrics.crosscheck import (
    decode_outputs,
    encode_outputs,
    generation_delta,
    output_rows,
    text_hash,
    token_account,
)
from pytest_llmperf.metrics.records import RequestRecord


def page(generated, name="vllm:generation_tokens_total"):
    return (
        f"# HELP {name} Number of generation tokens processed.\n# TYPE {name} counter\n"
        f'{name}{{engine="0",model_name="m"}} {generated}\n'
        f'{name.replace("_total", "_created")}{{engine="0",model_name="m"}} 1.7e9\n'
    )


def done(index, tokens, chunks, text="", finish="length", send=0.0):
    return RequestRecord(
        index=index,
        send_time=send,
        chunk_times=[send + k + 1.0 for k in range(chunks)],
        end_time=send + chunks + 1.0,
        completion_tokens=tokens,
        finish_reason=finish,
        output_text=text,
        status=200,
    )


def failed(index, chunks, cut=False):
    record = done(index, None, chunks)
    record.error, record.cut_at_cap, record.finish_reason = "cut at the cap" if cut else "reset", cut, None
    return record


def test_counts_that_agree_leave_nothing_to_flag():
    records = [done(0, 10, 10), done(1, 4, 4)]
    account = token_account(records, page(1000), page(1014), chat=False, max_tokens=16)
    assert (account.usage, account.events, account.counter, account.events_over) == (14, 14, 14, 0)
    assert not account.counter_off and not account.usage_short


def test_speculative_chunks_carry_several_tokens_and_chat_has_a_role_chunk_with_none():
    # 3 chunks for 10 tokens (MTP); chat: a role chunk first, so 4 chunks are 3 token events
    account = token_account([done(0, 10, 4)], page(0), page(10), chat=True, max_tokens=16)
    assert (account.events, account.events_over, account.counter_off) == (3, 0, False)


def test_usage_below_the_token_events_is_short_and_the_counter_beyond_usage_is_off():
    short = token_account([done(0, 5, 10), done(1, 5, 10)], page(0), page(10), chat=False, max_tokens=16)
    assert short.events_over == 10 and short.usage_short  # beyond the 2-token minimum slack
    assert not short.counter_off  # the counter agrees with usage: the events are what disagree
    high = token_account([done(0, 100, 100)], page(0), page(103), chat=False, max_tokens=128)
    assert high.counter_off and not high.usage_short  # 3 over, slack max(2, 0.5) = 2
    within = token_account([done(0, 100, 100)], page(0), page(102), chat=False, max_tokens=128)
    assert not within.counter_off


def test_requests_without_usage_widen_the_counters_range_by_what_they_could_have_generated():
    records = [done(0, 20, 20), failed(1, 5, cut=True), failed(2, 0)]
    account = token_account(records, page(0), page(20 + 5 + 7), chat=False, max_tokens=32)
    assert (account.unreported, account.counter_low, account.counter_high) == (2, 25, 20 + 64)
    assert not account.counter_off
    below = token_account(records, page(0), page(21), chat=False, max_tokens=32)
    assert below.counter_off  # fewer than the cut request's 5 token events
    beyond = token_account(records, page(0), page(20 + 64 + 3), chat=False, max_tokens=32)
    assert beyond.counter_off
    unknown = token_account(records, page(0), page(10_000), chat=False, max_tokens=None)
    assert unknown.counter_high is None and not unknown.counter_off  # no max_tokens: no upper bound


@pytest.mark.parametrize(
    "before, after",
    [
        (None, page(10)),  # no page before the window
        (page(10), "garbage {"),  # unreadable
        (page(10), page(10, "vllm:prompt_tokens_total")),  # no generation counter: not vLLM
        (page(50), page(10)),  # went backwards: a restart
        (page(10), page(10)),  # frozen while usage counted tokens: stats disabled
    ],
)
def test_a_counter_that_cannot_be_read_is_unknown_not_a_mismatch(before, after):
    account = token_account([done(0, 10, 10)], before, after, chat=False, max_tokens=16)
    assert account.counter is None and not account.counter_off


def test_no_request_with_usage_has_no_account():
    assert token_account([failed(0, 3)], page(0), page(3), chat=False, max_tokens=16) is None
    assert generation_delta(page(3), page(8)) == 5


def test_output_lines_round_trip_in_dispatch_order_and_bad_lines_are_named():
    records = [done(5, 3, 3, "b", "stop", send=2.0), done(2, 4, 4, "a", send=1.0), failed(7, 2)]
    rows = output_rows(records)
    assert rows == [(2, "length", text_hash("a")), (5, "stop", text_hash("b"))]
    assert text_hash("a") != text_hash("b") and len(text_hash("")) == 12
    lines = encode_outputs(rows)
    assert lines == [f"2 length {text_hash('a')}", f"5 stop {text_hash('b')}"]
    assert decode_outputs(lines) == rows
    for bad, why in [
        ("2 length", "expected a prompt index"),
        ("x stop 0123456789ab", "expected a prompt index"),
        ("2 stop 0123456789xy", "not hexadecimal"),
        ("2 stop 0123", "12-character hash"),
    ]:
        with pytest.raises(ValueError, match=why):
            decode_outputs(["1 stop 0123456789ab", bad])
