"""A capped benchmark run: warm-up, then prompts at a fixed concurrency (optionally paced).
Request failures are recorded, never raised; Ctrl-C (and SIGTERM while TERMINATE is
active) returns the partial result with `stop_reason="interrupted"`.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.util.http import fetch_metrics_page, server_root
from pytest_llmperf.util.limits import is_too_many_open_files, too_many_open_files
from pytest_llmperf.util.signals import TERMINATE
from pytest_llmperf.workload.client import PendingRecord
from pytest_llmperf.workload.config import RunConfig, RunTuning
from pytest_llmperf.workload.dispatch import INTERRUPTED_BY, Dispatcher, LagProbe, run_on_event_loop, streaming_client
from pytest_llmperf.workload.http1 import Origin
from pytest_llmperf.workload.progress import Progress
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import RunResult, warmup_record
from pytest_llmperf.workload.schedule import arrival_offsets
from pytest_llmperf.workload.server_probe import RunningProbe
from pytest_llmperf.workload.workers import WorkerPool

__all__ = [
    "RunConfig",
    "RunTuning",
    "ServerUnreachable",
    "TooManyOpenFiles",
    "check_reachable",
    "run_benchmark",
    "run_benchmark_async",
    "run_warmup",
    "warmup_prompts",
]


class ServerUnreachable(ConnectionError):
    """Nothing accepts connections at the base URL (raised before any request is sent)."""


class TooManyOpenFiles(RuntimeError):
    """The run needs more file descriptors than RLIMIT_NOFILE allows; the message says the fix."""


def check_reachable(base_url: str, timeout: float) -> None:
    """Raise ServerUnreachable unless a TCP connection opens within `timeout`."""
    origin = Origin(base_url)
    try:
        with socket.create_connection((origin.host, origin.port), timeout=timeout):
            pass
    except OSError as exc:
        if is_too_many_open_files(exc):
            raise
        raise ServerUnreachable(
            f"cannot reach the server at {base_url} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}); is it running and listening on that host and port?"
        ) from exc


async def run_benchmark_async(
    base_url: str,
    model: str,
    requests: Sequence[SampledRequest],
    config: RunConfig,
    *,
    tuning: RunTuning | None = None,
    clock_speed: float = 1.0,
) -> RunResult:
    """`run_benchmark` for callers that already run an event loop (no Ctrl-C handling)."""
    _check_arguments(base_url, requests, config)
    with _out_of_files_said(config):
        await asyncio.get_running_loop().run_in_executor(None, check_reachable, base_url, config.connect_timeout)
        return await _run_benchmark(
            base_url, model, requests, config, tuning or RunTuning(), install_sigint=False, clock_speed=clock_speed
        )


@contextmanager
def _out_of_files_said(config: RunConfig) -> Iterator[None]:
    """EMFILE from anywhere in a run as one TooManyOpenFiles line with the fix."""
    try:
        yield
        return
    except OSError as exc:
        if not is_too_many_open_files(exc):
            raise
        message = too_many_open_files(config.concurrency)
    raise TooManyOpenFiles(message) from None  # no OSError traceback from deep in asyncio under it


def warmup_prompts(requests: Sequence[SampledRequest], measured: int, count: int) -> list[SampledRequest]:
    """`count` warm-up prompts: those beyond the first `measured` (so a prefix cache does not
    make measured prompts faster), cycled; the measured ones only when there are no others."""
    spare = requests[measured:] or requests
    return [spare[i % len(spare)] for i in range(count)] if spare else []


async def _warm_up(run: Dispatcher, prompts: Sequence[SampledRequest]) -> dict[str, float] | None:
    """Send `prompts` at the run's concurrency, uncapped; their figures, not their records."""
    if not prompts:
        return None
    pending, _, start = await run.run(prompts, capped=False)
    return warmup_record([p.finish() for p in pending], start)


def run_warmup(
    base_url: str, model: str, prompts: Sequence[SampledRequest], config: RunConfig
) -> dict[str, float] | None:
    """A warm-up on its own (a fresh server's, before its first run), nothing measured; its
    figures. Raises as run_benchmark does; Ctrl-C raises (there is nothing to keep)."""
    if not prompts:
        return None
    _check_arguments(base_url, prompts, config)
    base_url = server_root(base_url)

    async def warm() -> dict[str, float] | None:
        async with streaming_client(base_url, model, config) as client:
            return await _warm_up(Dispatcher(client, config), prompts)

    with _out_of_files_said(config):
        check_reachable(base_url, config.connect_timeout)
        return run_on_event_loop(warm())


async def _run_benchmark(
    base_url: str,
    model: str,
    requests: Sequence[SampledRequest],
    config: RunConfig,
    tuning: RunTuning,
    install_sigint: bool,
    clock_speed: float = 1.0,
) -> RunResult:
    base_url = server_root(base_url)
    measured = list(requests[: config.num_prompts] if config.num_prompts else requests)
    warmup = warmup_prompts(requests, len(measured), config.warmup_requests)
    pool: WorkerPool | None = None
    progress: Progress | None = None
    async with streaming_client(base_url, model, config) as client:
        run = Dispatcher(client, config, tuning)

        def on_signal(reason: str) -> None:
            if pool is not None:
                pool.interrupt(reason)
            run.interrupt(reason)

        with _interrupts_call(on_signal, install_sigint):
            warmed = await _warm_up(run, warmup)  # its figures only: warm-up is not measured
            if not run.interrupted and config.workers == 1:
                # send times exclude connecting; so must TTFT: connect before measuring
                await client.open_connections(config.concurrency)
            metrics_before = None if run.interrupted else await fetch_metrics_page(base_url)
            running = None  # the server's running requests through the window, where it has /metrics
            if metrics_before is not None:
                running = RunningProbe(base_url, (lambda: run.in_flight) if config.workers == 1 else None)
            started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
            if running is not None:
                running.start()
            try:
                if config.workers > 1 and not run.interrupted:
                    offsets = arrival_offsets(len(measured), config.request_rate, config.burstiness, config.seed)
                    pool = WorkerPool(base_url, model, config, measured, offsets, tuning)
                    records, stop, start = await pool.run()
                    pending: list[PendingRecord] = []
                    client_lag = None  # each worker has its own loop; not probed
                else:
                    progress = Progress(
                        len(measured),
                        enabled=config.progress,
                        quiet_for=tuning.progress_quiet_seconds,
                        interval=tuning.progress_interval,
                        clock_speed=clock_speed,
                        label=config.label,
                    )
                    pending, stop, start, client_lag = await _measure_here(run, measured, progress)
                    records = []
            finally:
                samples = await running.stop() if running is not None else None
            # Scraped before decoding, right after the last measured completion.
            metrics_after = await fetch_metrics_page(base_url) if metrics_before is not None else None
    records += [p.finish() for p in pending]
    ends = [r.end_time for r in records if r.end_time is not None]
    duration = (max(ends) - start) if ends else 0.0
    if progress is not None:  # its last line from the decoded records: what the result says
        progress.close(records, duration)
    return RunResult(
        config=config.as_dict(),
        records=records,
        duration=duration,
        attempted=len(records),
        stop_reason=stop,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        started_at=started_at,
        client_lag=client_lag,
        clock_speed=clock_speed,
        warmup=warmed,
        running=samples,
    )


@contextmanager
def _interrupts_call(on_signal: Callable[[str], None], install: bool) -> Iterator[None]:
    """While the body runs, Ctrl-C (and SIGTERM while TERMINATE is active) calls `on_signal`
    with the interruption's reason, on the main thread."""
    loop = asyncio.get_running_loop()
    handled: dict[signal.Signals, Any] = {}  # signal -> the handler to put back

    def handler(reason: str) -> None:
        if reason == INTERRUPTED_BY["SIGTERM"]:
            TERMINATE.note()
        on_signal(reason)

    if install and threading.current_thread() is threading.main_thread():
        reasons = {signal.SIGINT: INTERRUPTED_BY["SIGINT"]}
        if TERMINATE.active:
            reasons[signal.SIGTERM] = INTERRUPTED_BY["SIGTERM"]
        for sig, reason in reasons.items():
            handled[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, handler, reason)
    try:
        yield
    finally:
        for sig, previous in handled.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous)


async def _measure_here(
    run: Dispatcher, prompts: list[SampledRequest], progress: Progress
) -> tuple[list[PendingRecord], str, float, dict[str, float] | None]:
    """The measured prompts (none once interrupted) on this event loop, the progress line
    ticking and the loop's lag probed: (pending records, stop reason, start, client lag)."""
    loop = asyncio.get_running_loop()
    ticker = loop.create_task(_tick(progress))
    probe = LagProbe(loop)
    probe.start()
    try:
        pending, stop, start = await run.run([] if run.interrupted else prompts, capped=True, progress=progress)
    except BaseException:
        progress.close()
        raise
    finally:
        client_lag = probe.stop()
        ticker.cancel()
    return pending, stop, start, client_lag


async def _tick(progress: Progress) -> None:
    while True:
        await asyncio.sleep(progress.interval)
        progress.tick()


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


def run_benchmark(
    base_url: str,
    model: str,
    requests: Sequence[SampledRequest],
    config: RunConfig,
    *,
    tuning: RunTuning | None = None,
    clock_speed: float = 1.0,
) -> RunResult:
    """Run `requests` against the server and return the measured result (`tuning`: how the
    client works, never what it measures). Raises ServerUnreachable, TooManyOpenFiles, ValueError."""
    _check_arguments(base_url, requests, config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_benchmark() cannot run inside an event loop; await run_benchmark_async(...) there instead"
        )
    with _out_of_files_said(config):
        check_reachable(base_url, config.connect_timeout)
        return run_on_event_loop(
            _run_benchmark(
                base_url, model, requests, config, tuning or RunTuning(), install_sigint=True, clock_speed=clock_speed
            )
        )
