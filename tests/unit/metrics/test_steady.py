"""The steady-state window and its throughput, from known spans."""

from __future__ import annotations

import pytest

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.steady import steady_tok_s, steady_window
from pytest_llmperf.metrics.summary import summarize


def closed_loop(concurrency: int, per_stream: int, length: float, tail: list[float]) -> list[tuple[float, float]]:
    """`concurrency` streams each sending `per_stream` requests of `length` s back to back,
    then one last request per stream ending at 'the stream's end + tail[i]'."""
    spans = []
    for s in range(concurrency):
        t = 0.0
        for _ in range(per_stream):
            spans.append((t, t + length))
            t += length
        spans.append((t, t + tail[s]))
    return spans


def test_window_runs_from_full_concurrency_to_the_first_stream_that_stops():
    # four streams, three requests of 10 s each, then last requests of 1..4 s: the
    # ramp-down starts when the first stream finishes at 31 s
    spans = closed_loop(4, 3, 10.0, [1.0, 2.0, 3.0, 4.0])
    assert steady_window(spans, 4) == (0.0, 31.0)


def test_dips_between_a_completion_and_the_next_dispatch_do_not_end_the_window():
    spans = [(0.0, 5.0), (5.001, 10.0), (0.0, 10.0)]  # one stream re-dispatches 1 ms late
    assert steady_window(spans, 2) == (0.0, 10.0)


def test_ninety_percent_of_the_concurrency_is_enough():
    # ten streams; one stops at 5 s, the other nine run to 20 s: still >= ceil(0.9 * 10)
    spans = [(0.0, 5.0)] + [(0.0, 20.0)] * 9
    assert steady_window(spans, 10) == (0.0, 20.0)
    spans = [(0.0, 5.0), (0.0, 6.0)] + [(0.0, 20.0)] * 8  # two stopped: eight of ten
    assert steady_window(spans, 10) == (0.0, 6.0)


def test_fewer_requests_than_the_concurrency_are_judged_by_their_number():
    assert steady_window([(0.0, 4.0), (0.0, 8.0)], 32) == (0.0, 4.0)


def test_never_at_concurrency_or_nothing_gives_none():
    assert steady_window([], 4) is None
    assert steady_window([(0.0, 1.0), (2.0, 3.0)], 2) is None  # never two at once
    assert steady_window([(0.0, 0.0)], 1) is None  # an empty window


def test_tokens_counted_by_the_share_of_their_events_inside_the_window():
    # window (0, 10): the second request has 4 events, 2 of them after the window
    requests = [
        (0.0, 10.0, [2.5, 5.0, 7.5, 10.0], 8),
        (0.0, 14.0, [4.0, 8.0, 12.0, 14.0], 100),
    ]
    assert steady_window([(a, b) for a, b, *_ in requests], 2) == (0.0, 10.0)
    assert steady_tok_s(requests, 2) == pytest.approx((8 + 100 * 2 / 4) / 10.0)


def test_a_uniformly_slower_run_reads_exactly_slower():
    fast = [(a, b, [b], 10) for a, b in closed_loop(8, 3, 10.0, [3.0, 9.0, 1.0, 4.0, 2.0, 8.0, 5.0, 7.0])]
    slow = [(a * 1.1, b * 1.1, [t * 1.1 for t in ts], n) for a, b, ts, n in fast]
    assert steady_tok_s(slow, 8) == pytest.approx(steady_tok_s(fast, 8) / 1.1)


def record(i: int, send: float, chunks: list[float], tokens: int, error: str | None = None) -> RequestRecord:
    return RequestRecord(
        index=i,
        send_time=send,
        chunk_times=chunks,
        end_time=chunks[-1] if chunks else send + 1.0,
        prompt_tokens=10,
        completion_tokens=tokens,
        error=error,
    )


def test_summary_leaves_the_tail_out_of_steady_decode_and_keeps_it_in_decode():
    # two streams: 10 tokens over 10 s each, then one stream alone for 10 s more
    records = [
        record(0, 0.0, [float(t) for t in range(1, 11)], 10),
        record(1, 0.0, [float(t) for t in range(1, 11)], 10),
        record(2, 10.0, [float(t) for t in range(11, 21)], 10),
    ]
    s = summarize(records, duration=20.0, concurrency=2)
    assert s.decode_tok_s == pytest.approx(30 / 20)
    assert s.steady_decode_tok_s == pytest.approx(20 / 10)
    # without a concurrency, the most in flight together (2) is used
    assert summarize(records, duration=20.0).steady_decode_tok_s == pytest.approx(2.0)


def test_a_failed_request_held_a_slot_but_brought_no_tokens():
    records = [record(0, 0.0, [5.0, 10.0], 10), record(1, 0.0, [], 0, error="HTTP 500")]
    records[1].end_time = 10.0
    assert summarize(records, duration=10.0, concurrency=2).steady_decode_tok_s == pytest.approx(1.0)


def test_a_request_cut_at_the_time_cap_is_left_out_not_counted_empty():
    # Two streams of 1 token/s. Stream 0: a request 0-10 s, then one sent at 10 s and cut at
    # the cap's grace at 20 s (its 10 chunks have no token count). Stream 1: 0-12 s.
    records = [
        record(0, 0.0, [float(t) for t in range(1, 11)], 10),
        record(1, 0.0, [float(t) for t in range(1, 13)], 12),
        record(2, 10.0, [float(t) for t in range(11, 21)], 0, error="cut: still running 30 s after the 60 s cap"),
    ]
    records[2].cut_at_cap = True
    # Left out, stream 0 looks idle from 10 s: the window is 0-10 s, both streams' 2 tok/s.
    assert summarize(records, duration=20.0, concurrency=2).steady_decode_tok_s == pytest.approx(2.0)
    # Counted in flight with no tokens, it held the window to 12 s at (10 + 12) / 12 tok/s;
    # a request failed by the server still is (the test above).
    records[2].cut_at_cap = False
    assert summarize(records, duration=20.0, concurrency=2).steady_decode_tok_s == pytest.approx(22 / 12)


def test_simulator_clock_is_converted_to_real_time():
    records = [record(0, 0.0, [1.0, 2.0], 4)]
    assert summarize(records, duration=2.0, clock_speed=10.0, concurrency=1).steady_decode_tok_s == pytest.approx(0.2)
