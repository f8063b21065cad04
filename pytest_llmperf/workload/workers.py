"""Spread the measured streams over several client processes (`RunConfig.workers`),
round robin, each with its share of the concurrency; they start together at one
`perf_counter()` time. Ctrl-C reaches the parent, which tells every worker to stop.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection as Pipe
from time import perf_counter

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.util.limits import is_too_many_open_files
from pytest_llmperf.workload.config import RunConfig, RunTuning
from pytest_llmperf.workload.dispatch import INTERRUPTED_BY, Dispatcher, run_on_event_loop, streaming_client
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import ALL_SENT

READY_TIMEOUT_S = 120.0
START_MARGIN_S = 0.05


def split(
    requests: Sequence[SampledRequest], offsets: Sequence[float], concurrency: int, workers: int
) -> list[tuple[list[SampledRequest], list[float], int]]:
    """Round-robin shares: (requests, offsets, concurrency) per worker."""
    shares = []
    for w in range(workers):
        conc = concurrency // workers + (1 if w < concurrency % workers else 0)
        shares.append((list(requests[w::workers]), list(offsets[w::workers]), conc))
    return shares


def _worker(
    pipe: Pipe,
    base_url: str,
    model: str,
    config: RunConfig,
    tuning: RunTuning,
    requests: list[SampledRequest],
    offsets: list[float],
) -> None:
    """A worker process: connect, say "ready", start at the time the parent sends with
    "go", stop early on "stop", send back the finished records (or the error)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C

    async def share() -> tuple[list[RequestRecord], str]:
        loop = asyncio.get_running_loop()
        async with streaming_client(base_url, model, config) as client:
            await client.open_connections(config.concurrency)
            pipe.send(("ready",))
            msg = await loop.run_in_executor(None, pipe.recv)
            run = Dispatcher(client, config, tuning)
            if msg[0] != "go":
                return [], "interrupted"

            def on_message() -> None:
                if pipe.poll() and (stop := pipe.recv())[0] == "stop" and not run.interrupted:
                    run.interrupt(*stop[1:])

            loop.add_reader(pipe.fileno(), on_message)
            try:
                pending, stop, _ = await run.run(requests, capped=True, offsets=offsets, start_at=msg[1])
            finally:
                loop.remove_reader(pipe.fileno())
        return [p.finish() for p in pending], stop

    try:
        pipe.send(("done", *run_on_event_loop(share())))
    except BaseException as exc:  # reported, so the parent never waits forever
        pipe.send(("error", f"{type(exc).__name__}: {exc}", getattr(exc, "errno", None)))


class WorkerPool:
    """The worker processes of one measured run."""

    def __init__(
        self,
        base_url: str,
        model: str,
        config: RunConfig,
        requests: Sequence[SampledRequest],
        offsets: Sequence[float],
        tuning: RunTuning | None = None,
    ) -> None:
        tuning = tuning or RunTuning()
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with a running loop
        self.pipes: list[Pipe] = []
        self.procs = []
        for reqs, offs, conc in split(requests, offsets, config.concurrency, config.workers):
            parent_end, child_end = ctx.Pipe()
            cfg = replace(config, concurrency=conc, workers=1, progress=False)
            proc = ctx.Process(target=_worker, args=(child_end, base_url, model, cfg, tuning, reqs, offs), daemon=True)
            proc.start()
            child_end.close()
            self.pipes.append(parent_end)
            self.procs.append(proc)

    async def run(self) -> tuple[list[RequestRecord], str, float]:
        loop = asyncio.get_running_loop()
        try:
            for pipe in self.pipes:
                if not await loop.run_in_executor(None, pipe.poll, READY_TIMEOUT_S):
                    raise RuntimeError(f"a client worker was not ready after {READY_TIMEOUT_S:g} s")
                msg = pipe.recv()
                if msg[0] != "ready":
                    if len(msg) > 2 and is_too_many_open_files(OSError(msg[2], msg[1])):
                        raise OSError(msg[2], f"a client worker ran out of file descriptors: {msg[1]}")
                    raise RuntimeError(f"a client worker failed to start: {msg[1]}")
            start = perf_counter() + START_MARGIN_S
            for pipe in self.pipes:
                pipe.send(("go", start))
            results = [await loop.run_in_executor(None, pipe.recv) for pipe in self.pipes]
        finally:
            self.close()
        records: list[RequestRecord] = []
        stops = set()
        for res in results:
            if res[0] != "done":
                if len(res) > 2 and is_too_many_open_files(OSError(res[2], res[1])):
                    raise OSError(res[2], f"a client worker ran out of file descriptors: {res[1]}")
                raise RuntimeError(f"a client worker failed: {res[1]}")
            records.extend(res[1])
            stops.add(res[2])
        records.sort(key=lambda r: r.index)
        stop = next((s for s in ("interrupted", "max_seconds") if s in stops), ALL_SENT)
        return records, stop, start

    def interrupt(self, reason: str = INTERRUPTED_BY["SIGINT"]) -> None:
        for pipe in self.pipes:
            try:
                pipe.send(("stop", reason))
            except OSError:
                pass

    def close(self) -> None:
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
