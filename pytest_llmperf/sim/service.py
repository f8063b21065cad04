"""The running engine: one asyncio task advancing steps in real time, fault state and the
log of what was sent when, on `time.perf_counter()` (comparable across local processes)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.engine import Emission, Engine, SimRequest
from pytest_llmperf.sim.metrics import VllmMetrics

log = logging.getLogger("pytest_llmperf.sim")

REQUEST_LOG_SIZE = 100_000
# Further behind schedule, the schedule restarts from now; below it, steps catch up back to back.
_MAX_LAG_S = 0.25


class EngineDead(Exception):
    """The simulated engine crashed (a fault knob); streams in flight are cut."""


class EngineService:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.engine = Engine(config)
        self.metrics = VllmMetrics(config.model_id, self.engine.k, counter_scale=config.counter_scale)
        if not config.disable_log_stats:  # as vLLM: families exist, nothing moves
            self.engine.stats.append(self.metrics)
        self.started_at = time.perf_counter()
        self.dead = False
        self.on_dead: Callable[[], None] | None = None  # the CLI exits when crash_exit is set
        self.received = 0
        self.request_log: deque[dict[str, Any]] = deque(maxlen=REQUEST_LOG_SIZE)
        self.max_lag = 0.0  # how far behind real time the loop fell
        self._lag_warned_at = -1e9
        self._queues: dict[int, asyncio.Queue[Emission | None]] = {}  # None: the engine died
        self._fault_rng = random.Random(f"{config.seed}:faults")
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self._wake = asyncio.Event()
        self.started_at = time.perf_counter()
        self._tasks.append(asyncio.create_task(self._loop(), name="sim-engine"))
        if self.config.crash_after_seconds is not None:
            crash = self._crash_timer(self.config.crash_after_seconds)
            self._tasks.append(asyncio.create_task(crash, name="sim-crash-timer"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        self._cut_all()

    @property
    def starting(self) -> bool:
        return time.perf_counter() - self.started_at < self.config.slow_start_seconds

    def die(self, why: str) -> None:
        if self.dead:
            return
        self.dead = True
        log.error("sim: engine dead (%s); cutting %d stream(s)", why, len(self._queues))
        self._cut_all()
        if self.on_dead is not None:
            self.on_dead()

    def _cut_all(self) -> None:
        for q in self._queues.values():
            q.put_nowait(None)
        self._queues.clear()

    async def _crash_timer(self, after: float) -> None:
        await asyncio.sleep(after)
        self.die(f"crash_after_seconds={after}")

    # -- requests ------------------------------------------------------------------------
    def admit(self) -> str | None:
        """Count a new request; the reason it must fail (500), or None."""
        self.received += 1
        n = self.config.crash_after_requests
        if n is not None and self.received > n:
            self.die(f"crash_after_requests={n}")
        if self.dead:
            return "dead"
        if self.config.error_rate and self._fault_rng.random() < self.config.error_rate:
            return "injected"
        return None

    def stream_faulty(self) -> bool:
        return self._fault_rng.random() < self.config.fault_request_rate

    def submit(self, req: SimRequest) -> asyncio.Queue[Emission | None]:
        """Queue a request in the engine; its emissions arrive on the returned queue."""
        q: asyncio.Queue[Emission | None] = asyncio.Queue()
        self._queues[id(req)] = q
        self.engine.add(req)
        self._refresh_gauges()
        assert self._wake is not None, "EngineService.start() was not awaited"
        self._wake.set()
        return q

    def release(self, req: SimRequest, finished: bool) -> None:
        """The response is over; a request the client left is aborted in the engine."""
        self._queues.pop(id(req), None)
        if not finished and not req.done and not req.aborted:
            self.engine.abort(req)
            if not self.config.disable_log_stats:
                self.metrics.success["abort"].inc()

    def _refresh_gauges(self) -> None:
        if not self.config.disable_log_stats:
            e = self.engine
            self.metrics.set_queue(len(e.running), len(e.waiting), e.kv_usage)

    # -- the engine loop -----------------------------------------------------------------
    async def _loop(self) -> None:
        assert self._wake is not None
        engine = self.engine
        start = time.perf_counter()
        while not self.dead:
            if not engine.has_work:
                self._refresh_gauges()
                self._wake.clear()
                await self._wake.wait()
                start = time.perf_counter()
                continue
            step = engine.plan(start)
            if step is None:
                continue
            self._refresh_gauges()
            end = start + step.duration
            delay = end - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # let the streams run even when late
            if self.dead:
                break
            now = time.perf_counter()
            lag = now - end
            self.max_lag = max(self.max_lag, lag)
            self.metrics.counters["step_seconds"].inc(step.duration)  # kept under --disable-log-stats: the sim's own
            self.metrics.counters["lag_seconds"].inc(max(lag, 0.0))
            if lag >= _MAX_LAG_S and now - self._lag_warned_at > 10:
                self._lag_warned_at = now
                log.warning(
                    "sim: the engine loop is %.2f s behind its schedule (host too busy for speed x%g): "
                    "simulated times are stretched; lower --sim-speed",
                    lag,
                    self.config.speed,
                )
            for em in engine.complete(step, now):
                q = self._queues.get(id(em.request))
                if q is not None:
                    q.put_nowait(em)
            start = end if lag < _MAX_LAG_S else now
