"""A capped benchmark run: warm-up, then prompts at a fixed concurrency (optionally paced).

`run_benchmark` is synchronous and runs its own event loop. Request failures are
recorded, never raised; an unreachable server raises `ServerUnreachable` before the
run; Ctrl-C cuts the requests in flight and *returns* the partial result with
`stop_reason="interrupted"` (a second Ctrl-C while it winds down raises as usual).
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from time import perf_counter
from typing import Any

from pytest_llmperf.util.http import fetch_metrics_page, server_root
from pytest_llmperf.util.secrets import REDACTED
from pytest_llmperf.workload.client import ENDPOINTS, PendingRecord, StreamingClient
from pytest_llmperf.workload.http1 import Origin
from pytest_llmperf.workload.progress import Progress
from pytest_llmperf.workload.records import SampledRequest
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.schedule import arrival_offsets
from pytest_llmperf.workload.workers import WorkerPool


class ServerUnreachable(ConnectionError):
    """Nothing accepts connections at the base URL (raised before any request is sent)."""


@dataclass
class RunConfig:
    concurrency: int = 1
    num_prompts: int | None = None  # None: every request given
    max_seconds: float | None = None  # None: no time cap
    max_tokens: int | None = 256  # None: each prompt's expected_output_len
    warmup_requests: int = 1
    endpoint: str = "completions"  # "completions" | "chat"
    request_rate: float = math.inf  # requests/s; inf sends as fast as concurrency allows
    burstiness: float = 1.0  # gamma shape of the arrival gaps; 1 = Poisson
    seed: int = 0  # for the arrival gaps
    ignore_eos: bool = False
    api_key: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 300.0  # longest silence between bytes of one response
    grace_seconds: float = 30.0  # after max_seconds, in-flight requests get this long
    progress: bool = True  # a progress line on stderr for runs over a few seconds
    # Client processes sharing the streams (each with concurrency/workers of them). One is
    # enough for hundreds of streams (README, "Performance of the measuring client").
    workers: int = 1

    def __post_init__(self) -> None:
        def bad(name: str, fix: str) -> ValueError:
            return ValueError(f"RunConfig.{name}={getattr(self, name)!r} is invalid: {fix}")

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        if not is_int(self.concurrency) or self.concurrency < 1:
            raise bad("concurrency", "use an integer >= 1")
        if self.num_prompts is not None and (not is_int(self.num_prompts) or self.num_prompts < 1):
            raise bad("num_prompts", "use an integer >= 1, or None for all requests")
        if self.max_seconds is not None and not (
            isinstance(self.max_seconds, (int, float)) and 0 < self.max_seconds < math.inf
        ):
            raise bad("max_seconds", "use a number of seconds > 0, or None for no time cap")
        if self.max_tokens is not None and (not is_int(self.max_tokens) or self.max_tokens < 1):
            raise bad("max_tokens", "use an integer >= 1, or None for each prompt's expected length")
        if not is_int(self.warmup_requests) or self.warmup_requests < 0:
            raise bad("warmup_requests", "use an integer >= 0")
        if self.endpoint not in ENDPOINTS:
            raise bad("endpoint", f"use one of {sorted(ENDPOINTS)}")
        if not isinstance(self.request_rate, (int, float)) or not self.request_rate > 0:
            raise bad("request_rate", "use requests per second > 0, or math.inf for no pacing")
        if not isinstance(self.burstiness, (int, float)) or not 0 < self.burstiness < math.inf:
            raise bad("burstiness", "use a finite number > 0 (1.0 is a Poisson process)")
        for name in ("connect_timeout", "read_timeout"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise bad(name, "use a finite number of seconds > 0")
        if not isinstance(self.grace_seconds, (int, float)) or not 0 <= self.grace_seconds < math.inf:
            raise bad("grace_seconds", "use a finite number of seconds >= 0")
        if not is_int(self.workers) or not 1 <= self.workers <= self.concurrency:
            raise bad("workers", "use an integer from 1 to concurrency")

    def as_dict(self) -> dict[str, Any]:
        """asdict, with the API key redacted (results are written to files)."""
        d = asdict(self)
        if d["api_key"]:
            d["api_key"] = REDACTED
        for k in ("request_rate", "burstiness"):
            if isinstance(d[k], float) and math.isinf(d[k]):
                d[k] = "inf"  # JSON has no infinity
        return d


def check_reachable(base_url: str, timeout: float) -> None:
    """Raise ServerUnreachable unless a TCP connection opens within `timeout`."""
    origin = Origin(base_url)
    try:
        with socket.create_connection((origin.host, origin.port), timeout=timeout):
            pass
    except OSError as exc:
        raise ServerUnreachable(
            f"cannot reach the server at {base_url} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); is it running and listening on that host and port?"
        ) from exc


# Runs shorter than this print no progress line.
PROGRESS_QUIET_SECONDS = 3.0

# Bodies are decoded after the run (see `_Run.run`) while the raw bytes kept stay
# under this; past it, each body is decoded as its stream ends.
DEFER_DECODE_BYTES = 512 * 1024 * 1024


class _Run:
    """The dispatch loop of one run; `interrupt()` may be called from a signal handler."""

    def __init__(self, client: StreamingClient, config: RunConfig) -> None:
        self.client = client
        self.config = config
        self.loop = asyncio.get_running_loop()
        self.interrupted = False
        self._wake: asyncio.Future[None] | None = None
        self._in_flight = 0
        self._kept_bytes = 0

    def interrupt(self) -> None:
        if self.interrupted:  # a second Ctrl-C: stop waiting for the wind-down
            raise KeyboardInterrupt
        self.interrupted = True
        self.client.cut_all("interrupted (Ctrl-C)")
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
        """Returns (requests in dispatch order, stop reason, time of the first dispatch).

        Streams are decoded by the caller, after the last one ends: requests of equal length finish
        together, and decoding each as it ends would stall the event loop right when
        the others' last chunks arrive, inflating their TPOT by several percent at
        high concurrency (benchmarks/client_overhead.py).

        `offsets` (arrival times after the start) and `start_at` (a perf_counter time to
        start at) let worker processes share one schedule.
        """
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
        tasks: list[asyncio.Task[PendingRecord]] = []
        stop = "completed"
        self._kept_bytes = 0

        def finished(task: asyncio.Task[PendingRecord]) -> None:
            self._in_flight -= 1
            if not task.cancelled() and task.exception() is None:
                pending = task.result()
                if progress is not None:
                    progress.add(not pending.failed_hint, pending.completion_tokens_hint)
                if pending.response is not None:
                    self._kept_bytes += pending.response.bytes_seen
                    if self._kept_bytes > DEFER_DECODE_BYTES:
                        pending.finish()
            self._kick()

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
                stop = "max_seconds"
                break
            self._in_flight += 1
            max_tokens = cfg.max_tokens or req.expected_output_len
            task = self.loop.create_task(self.client.stream(req, max_tokens))
            task.add_done_callback(finished)
            tasks.append(task)
        if tasks:
            cut_at = deadline + cfg.grace_seconds
            while not self.interrupted and self._in_flight and perf_counter() < cut_at:
                await self._nap(cut_at)
            if self._in_flight:
                if not self.interrupted:
                    stop = "max_seconds"
                    self.client.cut_all(
                        f"cut: still running {cfg.grace_seconds:g} s after the {cfg.max_seconds:g} s cap"
                    )
                await asyncio.wait(tasks)
        if self.interrupted:
            stop = "interrupted"
        return [t.result() for t in tasks], stop, start


async def run_benchmark_async(
    base_url: str, model: str, requests: Sequence[SampledRequest], config: RunConfig
) -> RunResult:
    """`run_benchmark` for callers that already run an event loop (no Ctrl-C handling)."""
    _check_arguments(base_url, requests, config)
    await asyncio.get_running_loop().run_in_executor(None, check_reachable, base_url, config.connect_timeout)
    return await _run_benchmark(base_url, model, requests, config, install_sigint=False)


async def _run_benchmark(
    base_url: str, model: str, requests: Sequence[SampledRequest], config: RunConfig, install_sigint: bool
) -> RunResult:
    base_url = server_root(base_url)
    measured = list(requests[: config.num_prompts] if config.num_prompts else requests)
    # Warm-up prompts come from beyond the measured ones when the list has them, so a
    # prefix cache does not make measured prompts faster; else the list is reused.
    spare = requests[len(measured) :]
    warmup = [
        spare[i] if i < len(spare) else requests[(i - len(spare)) % len(requests)]
        for i in range(config.warmup_requests)
    ]
    client = StreamingClient(
        base_url,
        model,
        endpoint=config.endpoint,
        max_tokens=config.max_tokens or 256,
        ignore_eos=config.ignore_eos,
        api_key=config.api_key,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
    )
    loop = asyncio.get_running_loop()
    pool: WorkerPool | None = None
    async with client:
        run = _Run(client, config)

        def on_sigint() -> None:
            if pool is not None:
                pool.interrupt()
            run.interrupt()

        handled = install_sigint and threading.current_thread() is threading.main_thread()
        if handled:
            previous = signal.getsignal(signal.SIGINT)
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            if warmup:
                await run.run(warmup, capped=False)  # records dropped: warm-up is not measured
            if not run.interrupted and config.workers == 1:
                # send times exclude connecting; so must TTFT: connect before measuring
                await client.open_connections(config.concurrency)
            metrics_before = None if run.interrupted else await fetch_metrics_page(base_url)
            started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
            if config.workers > 1 and not run.interrupted:
                offsets = arrival_offsets(len(measured), config.request_rate, config.burstiness, config.seed)
                pool = WorkerPool(base_url, model, config, measured, offsets)
                records, stop, start = await pool.run()
                pending: list[PendingRecord] = []
            else:
                progress = Progress(len(measured), enabled=config.progress, quiet_for=PROGRESS_QUIET_SECONDS)
                ticker = loop.create_task(_tick(progress))
                try:
                    pending, stop, start = await run.run(
                        [] if run.interrupted else measured, capped=True, progress=progress
                    )
                finally:
                    ticker.cancel()
                    progress.close()
                records = []
            # Scraped before decoding, right after the last measured completion.
            metrics_after = await fetch_metrics_page(base_url) if metrics_before is not None else None
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
                signal.signal(signal.SIGINT, previous)
    records += [p.finish() for p in pending]
    ends = [r.end_time for r in records if r.end_time is not None]
    return RunResult(
        config=config.as_dict(),
        records=records,
        duration=(max(ends) - start) if ends else 0.0,
        attempted=len(records),
        stop_reason=stop,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        started_at=started_at,
    )


async def _tick(progress: Progress) -> None:
    while True:
        await asyncio.sleep(progress.interval)
        progress.tick()


def _loop_factory() -> Any:
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


def _check_arguments(base_url: str, requests: Sequence[SampledRequest], config: RunConfig) -> None:
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    if not requests:
        raise ValueError("requests is empty: sample at least one prompt")
    if config.num_prompts is not None and config.num_prompts > len(requests):
        raise ValueError(
            f"RunConfig.num_prompts={config.num_prompts} but only {len(requests)} requests "
            f"were given: sample at least num_prompts (+ warmup_requests) prompts"
        )
    Origin(base_url)  # ValueError for a malformed URL, before anything else


def run_benchmark(base_url: str, model: str, requests: Sequence[SampledRequest], config: RunConfig) -> RunResult:
    """Run `requests` against the server and return the measured result.

    Raises ServerUnreachable (a ConnectionError) when nothing listens at `base_url`,
    ValueError for bad arguments. Ctrl-C returns a partial result, stop_reason="interrupted".
    """
    _check_arguments(base_url, requests, config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_benchmark() cannot run inside an event loop; await run_benchmark_async(...) there instead"
        )
    check_reachable(base_url, config.connect_timeout)
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_run_benchmark(base_url, model, requests, config, install_sigint=True))


async def worker_main(
    pipe: Any, base_url: str, model: str, config: RunConfig, requests: list[SampledRequest], offsets: list[float]
) -> tuple[list, str]:
    """One worker process's share of a measured run (see workers.py)."""
    loop = asyncio.get_running_loop()
    client = StreamingClient(
        base_url,
        model,
        endpoint=config.endpoint,
        max_tokens=config.max_tokens or 256,
        ignore_eos=config.ignore_eos,
        api_key=config.api_key,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
    )
    async with client:
        await client.open_connections(config.concurrency)
        pipe.send(("ready",))
        msg = await loop.run_in_executor(None, pipe.recv)
        run = _Run(client, config)
        if msg[0] != "go":
            return [], "interrupted"

        def on_message() -> None:
            if pipe.poll() and pipe.recv()[0] == "stop" and not run.interrupted:
                run.interrupt()

        loop.add_reader(pipe.fileno(), on_message)
        try:
            pending, stop, _ = await run.run(requests, capped=True, offsets=offsets, start_at=msg[1])
        finally:
            loop.remove_reader(pipe.fileno())
    return [p.finish() for p in pending], stop
