"""The server's running and waiting request gauges, polled every half second through a
measured run over one kept-alive connection (metrics/concurrency.py judges them)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from time import perf_counter

import httpx

from pytest_llmperf.metrics.concurrency import RUNNING, WAITING, gauge_total
from pytest_llmperf.util.http import fetch_metrics_page


class RunningProbe:
    """`start()` when the window opens, `await stop()` when it closes: the samples
    `[seconds, client in flight, running, waiting]`, or None without any."""

    def __init__(self, base_url: str, in_flight: Callable[[], int] | None = None, interval: float = 0.5) -> None:
        self.base_url, self.in_flight, self.interval = base_url, in_flight, interval
        self.samples: list[list[float | None]] = []
        self.no_gauge = False
        self._client = httpx.AsyncClient(timeout=max(1.0, 4 * interval))
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll(perf_counter()))

    async def _poll(self, start: float) -> None:
        while True:
            await asyncio.sleep(self.interval)
            page = await fetch_metrics_page(self.base_url, client=self._client)
            if page is None:
                continue  # a slow or failed poll: the next one may answer
            running = gauge_total(page, RUNNING)
            if running is None:
                self.no_gauge = True
                return
            in_flight = self.in_flight() if self.in_flight is not None else None
            self.samples.append([round(perf_counter() - start, 3), in_flight, running, gauge_total(page, WAITING)])

    async def stop(self) -> list[list[float | None]] | None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a probe never breaks a run
                await self._task
        await self._client.aclose()
        return None if self.no_gauge or not self.samples else self.samples
