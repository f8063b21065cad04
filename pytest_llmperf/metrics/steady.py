"""Steady-state decode throughput: output tokens per second while the run is at its
concurrency, without the ramp-down tail of a capped run.

A closed-loop run at concurrency `c` keeps `c` requests in flight until no new request
is sent (the prompts ran out, or the time cap was reached); then the streams finish one
by one, fewer and fewer in flight. The whole-run figure (tokens / duration) averages over
that tail, and how long it lasts depends on where the cap fell in each stream's request:
under a time cap, two runs whose steps differ by a constant factor read different
ratios (a 10 % slower step read as -5 % on one server and -13 % on another of the same
suite), and an MTP speedup moves although both servers slowed alike.

The steady window runs from the first moment at least `ceil(share x c)` requests are in
flight to the last such moment (`share` = 0.9: SGLang's bench uses the same idea; brief
dips between one stream's completion and its next dispatch do not end it). The figure
is the output tokens emitted inside the window over its length. A request's tokens are
spread evenly over its token events (`usage` gives the count per request, not per
chunk; under speculation a chunk carries one to k + 1 tokens), so a request counts the
share of its events that fall in the window.

Times are whatever clock the records use; the caller converts to real time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

STEADY_SHARE = 0.9


def steady_window(spans: Iterable[tuple[float, float]], concurrency: int) -> tuple[float, float] | None:
    """(start, end) of the window with at least ceil(STEADY_SHARE x c) requests in flight,
    from (dispatch, end) spans; None when that many were never in flight together or the
    window is empty. A run with fewer requests than `concurrency` is judged by how many it
    had."""
    spans = [(a, b) for a, b in spans if b >= a]
    if not spans or concurrency < 1:
        return None
    need = max(1, math.ceil(STEADY_SHARE * min(concurrency, len(spans)) - 1e-9))
    # At equal times a completion comes before a dispatch: a stream's next request starts
    # just after its previous one ended, and the two are never in flight together.
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    running = 0
    start = end = None
    for t, step in events:
        if step < 0 and running >= need:
            end = t  # the last moment at or above the threshold, so far
        running += step
        if step > 0 and running >= need and start is None:
            start = t
    if start is None or end is None or end <= start:
        return None
    return start, end


def steady_tok_s(requests: Sequence[tuple[float, float, Sequence[float], int]], concurrency: int) -> float | None:
    """Output tokens per second inside the steady window.

    `requests`: (dispatch, end, token event times, output tokens) for every measured request;
    requests that failed count for what was in flight, with 0 tokens."""
    window = steady_window(((r[0], r[1]) for r in requests), concurrency)
    if window is None:
        return None
    start, end = window
    tokens = 0.0
    for _, _, times, count in requests:
        if times and count:
            inside = sum(1 for t in times if start < t <= end)
            tokens += count * inside / len(times)
    return tokens / (end - start)
