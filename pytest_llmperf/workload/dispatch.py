"""The dispatch loop shared by the runner and its worker processes: caps, pacing and the
concurrency limit over one `StreamingClient`, and the event loop they run on.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sys
from collections.abc import Coroutine, Sequence
from time import perf_counter
from typing import Any, TypeVar

from pytest_llmperf.workload.client import PendingRecord, StreamingClient
from pytest_llmperf.workload.config import RunConfig, RunTuning
from pytest_llmperf.workload.progress import Progress
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import ALL_SENT
from pytest_llmperf.workload.schedule import arrival_offsets

# The error of a request cut by an interrupt, by the signal that asked for it.
INTERRUPTED_BY = {"SIGINT": "interrupted (Ctrl-C)", "SIGTERM": "interrupted (SIGTERM)"}


def streaming_client(base_url: str, model: str, config: RunConfig) -> StreamingClient:
    """The client a run's config asks for (use it as `async with`)."""
    return StreamingClient(
        base_url,
        model,
        endpoint=config.endpoint,
        max_tokens=config.max_tokens or 256,
        ignore_eos=config.ignore_eos,
        api_key=config.api_key,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
    )


def event_loop_factory() -> Any:
    """uvloop when installed (its socket reads cost about half of asyncio's), unless
    PYTEST_LLMPERF_EVENT_LOOP=asyncio asks for the standard loop."""
    choice = os.environ.get("PYTEST_LLMPERF_EVENT_LOOP", "auto")
    if choice not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"PYTEST_LLMPERF_EVENT_LOOP={choice!r}: use auto, uvloop or asyncio")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ValueError(
                "PYTEST_LLMPERF_EVENT_LOOP=uvloop but uvloop is not installed: pip install uvloop"
            ) from None
        return None
    return uvloop.new_event_loop


T = TypeVar("T")


def run_on_event_loop(main: Coroutine[Any, Any, T]) -> T:
    """`main` run to completion on a new event loop of event_loop_factory()'s kind, as asyncio.run does."""
    factory = event_loop_factory()
    if sys.version_info >= (3, 11):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main)
    if factory is None:
        return asyncio.run(main)
    import uvloop  # the factory is uvloop's

    return uvloop.run(main, loop_factory=factory)


class LagProbe:
    """How late the event loop runs a callback due every `interval` seconds (a late loop
    timestamps chunks late), in wall-clock seconds on perf_counter."""

    TIMER_GRAIN_S = 0.001  # timers wake in whole milliseconds: the timer's grain, not lag
    # The largest probes left out of `trimmed_mean_s` (from TRIM_FROM probes up): an isolated GC.
    TRIM_SHARE = 0.05
    TRIM_FROM = 10

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float = 0.05) -> None:
        self.loop, self.interval = loop, interval
        self.lags: list[float] = []
        self._due = 0.0
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._due = perf_counter() + self.interval
        self._handle = self.loop.call_later(self.interval, self._tick)

    def _tick(self) -> None:
        now = perf_counter()
        self.lags.append(max(0.0, now - self._due - self.TIMER_GRAIN_S))
        self._due = now + self.interval
        self._handle = self.loop.call_later(self.interval, self._tick)

    def stop(self) -> dict[str, float] | None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self.lags:
            return None
        ordered = sorted(self.lags)
        n = len(ordered)
        kept = ordered[: n - math.ceil(self.TRIM_SHARE * n)] if n >= self.TRIM_FROM else ordered
        return {
            "probes": n,
            "mean_s": sum(ordered) / n,
            "trimmed_mean_s": sum(kept) / len(kept),
            "p99_s": ordered[min(n - 1, int(0.99 * n))],
            "max_s": ordered[-1],
        }


class Dispatcher:
    """The dispatch loop of one run (or of one worker's share of it); `interrupt()` may
    be called from a signal handler."""

    def __init__(self, client: StreamingClient, config: RunConfig, tuning: RunTuning | None = None) -> None:
        self.client = client
        self.config = config
        self.tuning = tuning or RunTuning()
        self.loop = asyncio.get_running_loop()
        self.interrupted = False
        self._wake: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._kept_bytes = 0

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet ended."""
        return self._in_flight

    def interrupt(self, reason: str = INTERRUPTED_BY["SIGINT"]) -> None:
        """Cut every stream in flight (each recorded as failed with `reason`) and send no more."""
        if self.interrupted:  # a second Ctrl-C: stop waiting for the wind-down
            raise KeyboardInterrupt
        self.interrupted = True
        self.client.cut_all(reason)
        self._kick()

    def _kick(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _nap(self, until: float) -> None:
        """Sleep until perf_counter() reaches `until`, or something changes."""
        delay = until - perf_counter()
        if delay <= 0:
            return
        self._wake = self.loop.create_future()
        handle = self.loop.call_later(delay, self._kick) if delay < math.inf else None
        try:
            await self._wake
        finally:
            if handle is not None:
                handle.cancel()

    async def run(
        self,
        requests: Sequence[SampledRequest],
        *,
        capped: bool,
        progress: Progress | None = None,
        offsets: Sequence[float] | None = None,
        start_at: float | None = None,
    ) -> tuple[list[PendingRecord], str, float]:
        """(requests in dispatch order, stop reason, first dispatch time). Streams are decoded
        after the last ends (decoding meanwhile would stall the loop) unless the bytes kept pass
        `defer_decode_bytes`; `offsets` and `start_at` let workers share one schedule."""
        cfg = self.config
        if offsets is None:
            offsets = (
                arrival_offsets(len(requests), cfg.request_rate, cfg.burstiness, cfg.seed)
                if capped
                else [0.0] * len(requests)
            )
        while start_at is not None and not self.interrupted and perf_counter() < start_at:
            await self._nap(start_at)
        start = perf_counter() if start_at is None else start_at
        deadline = start + cfg.max_seconds if (capped and cfg.max_seconds) else math.inf
        self._kept_bytes = 0
        tasks, stop = await self._dispatch(requests, offsets, start, deadline, progress)
        if tasks:  # the streams in flight get until the grace after the cap, then are cut
            cut_at = deadline + cfg.grace_seconds
            while not self.interrupted and self._in_flight and perf_counter() < cut_at:
                await self._nap(cut_at)
            if self._in_flight:
                if not self.interrupted:
                    stop = "max_seconds"
                    self.client.cut_all(
                        f"cut: still running {cfg.grace_seconds:g} s after the {cfg.max_seconds:g} s cap", at_cap=True
                    )
                await asyncio.wait(tasks)
        if self.interrupted:
            stop = "interrupted"
        return [t.result() for t in tasks], stop, start

    async def _dispatch(
        self,
        requests: Sequence[SampledRequest],
        offsets: Sequence[float],
        start: float,
        deadline: float,
        progress: Progress | None,
    ) -> tuple[list[asyncio.Task[PendingRecord]], str]:
        """Send each request at its offset, within the concurrency limit, until the deadline;
        (their tasks, "completed" or "max_seconds")."""
        cfg = self.config
        tasks: list[asyncio.Task[PendingRecord]] = []
        for req, offset in zip(requests, offsets):
            while (
                not self.interrupted
                and perf_counter() < deadline
                and (self._in_flight >= cfg.concurrency or perf_counter() < start + offset)
            ):
                wake_at = start + offset if self._in_flight < cfg.concurrency else deadline
                await self._nap(min(wake_at, deadline))
            if self.interrupted:
                break
            if perf_counter() >= deadline:
                return tasks, "max_seconds"
            self._in_flight += 1
            task = self.loop.create_task(self.client.stream(req, cfg.max_tokens or req.expected_output_len))
            task.add_done_callback(functools.partial(self._ended, progress))
            tasks.append(task)
        return tasks, ALL_SENT

    def _ended(self, progress: Progress | None, task: asyncio.Task[PendingRecord]) -> None:
        self._in_flight -= 1
        if not task.cancelled() and task.exception() is not None and not self.interrupted:
            # Only the client's own failure raises (out of file descriptors): stop now.
            self.interrupted = True
            self.client.cut_all(f"cut: the client failed ({task.exception()})")
        if not task.cancelled() and task.exception() is None:
            pending = task.result()
            if progress is not None:
                progress.add(not pending.failed_hint, pending.completion_tokens_hint)
            if pending.response is not None:
                self._kept_bytes += pending.response.bytes_seen
                if self._kept_bytes > self.tuning.defer_decode_bytes:
                    pending.finish()
        self._kick()
