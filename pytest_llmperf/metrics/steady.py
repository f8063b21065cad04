"""Steady-state decode throughput: output tokens per second while the run is at its
concurrency, without a capped run's ramp-down tail (whose length depends on where the
cap fell). A request's tokens are spread evenly over its token events.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

STEADY_SHARE = 0.9


def steady_window(spans: Iterable[tuple[float, float]], concurrency: int) -> tuple[float, float] | None:
    """(start, end) from the first to the last moment with ceil(STEADY_SHARE x c) of the
    (dispatch, end) spans in flight; None when never reached."""
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
    """Output tokens per second inside the steady window, from (dispatch, end, token event
    times, output tokens) per request."""
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
