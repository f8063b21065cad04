"""The event loop a run goes on (workload/dispatch.py): the kind PYTEST_LLMPERF_EVENT_LOOP
picks, on every Python the package supports (asyncio.Runner is 3.11+; runs on 3.10 once
failed with AttributeError)."""

import asyncio
import sys

import pytest

from pytest_llmperf.workload.dispatch import run_on_event_loop

uvloop = pytest.importorskip("uvloop")


async def _loop_seen() -> tuple[asyncio.AbstractEventLoop, int]:
    await asyncio.sleep(0)
    return asyncio.get_running_loop(), 42


@pytest.fixture(params=["native", "as on 3.10"])
def python(request, monkeypatch):
    if request.param == "as on 3.10":
        monkeypatch.setattr(sys, "version_info", (3, 10, 13, "final", 0))
        monkeypatch.delattr(asyncio, "Runner", raising=False)
    return request.param


@pytest.mark.parametrize("choice, uv", [("asyncio", False), ("uvloop", True), ("auto", True)])
def test_the_coroutine_runs_to_its_result_on_the_chosen_loop_which_is_closed_after(python, monkeypatch, choice, uv):
    monkeypatch.setenv("PYTEST_LLMPERF_EVENT_LOOP", choice)
    loop, value = run_on_event_loop(_loop_seen())
    assert value == 42
    assert isinstance(loop, uvloop.Loop) is uv
    assert loop.is_closed()


def test_what_the_coroutine_raises_comes_out(python, monkeypatch):
    monkeypatch.setenv("PYTEST_LLMPERF_EVENT_LOOP", "uvloop")

    async def boom() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        run_on_event_loop(boom())


def test_a_bad_choice_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.setenv("PYTEST_LLMPERF_EVENT_LOOP", "trio")
    main = _loop_seen()
    with pytest.raises(ValueError, match="PYTEST_LLMPERF_EVENT_LOOP='trio'"):
        run_on_event_loop(main)
    main.close()


def test_the_lag_probe_sees_a_loop_blocked_for_longer_than_its_interval():
    import asyncio
    import time

    from pytest_llmperf.workload.dispatch import LagProbe

    async def main():
        probe = LagProbe(asyncio.get_running_loop(), interval=0.01)
        probe.start()
        await asyncio.sleep(0.1)  # ~10 probes each side of the stall: the trimmed mean applies
        time.sleep(0.1)  # the loop is blocked: the next probe fires ~0.1 s late
        await asyncio.sleep(0.1)
        return probe.stop()

    stats = asyncio.run(main())
    assert stats["probes"] >= 5
    assert 0.08 < stats["max_s"] < 0.5 and stats["p99_s"] == stats["max_s"]
    assert stats["mean_s"] < stats["max_s"]
    # the one stall is the latest probe, left out of the trimmed mean (from ten probes up)
    assert stats["probes"] >= LagProbe.TRIM_FROM
    assert stats["trimmed_mean_s"] < stats["mean_s"] and stats["trimmed_mean_s"] < 0.02
    assert LagProbe(asyncio.new_event_loop()).stop() is None  # never started: nothing measured
