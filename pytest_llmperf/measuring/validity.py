"""Whether a measured run can be judged at all (`invalid_reason`, for the gate), and
whether its host fell behind (`host_behind`: the measurer makes such a run again)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.crosscheck import token_mismatch
from pytest_llmperf.metrics.failures import ErrorBudget, combine, failures
from pytest_llmperf.workload.prompts import random_length_mismatch
from pytest_llmperf.workload.result import RunResult

# Beyond these, a run measured its host's load, not the server.
MAX_ENGINE_LAG = 0.5  # the simulator's engine steps, late by this share of a step (RunResult.engine_lag)
MAX_CLIENT_LAG = 0.5  # the client's event loop (RunResult.client_lag_share)
MAX_BURST_SHARE = 0.25  # zero gaps between chunks: a proxy or a late client buffered them


def invalid_reason(run: MeasuredRun, budget: ErrorBudget) -> str | None:
    """Why `run` cannot be judged (a dead server, failures beyond the budget, a host behind,
    bursts, the concurrency not reached, token counts or prompt lengths off), or None."""
    broken = combine(failures(r.records, r.attempted) for r in run.results)
    if run.server_death:
        return _death_reason(run, broken.describe() if broken.attempted else None)
    if broken.failed and not budget.allows(broken.failed, broken.attempted):
        return (
            f"{broken.describe()}; error budget {budget} (--llmperf-error-budget or the marker's "
            "error_budget=); fix the server or the workload, the figures of a broken run judge nothing"
        )
    if not run.completed:
        return f"no request completed ({broken.describe()})" if broken.failed else "no request completed"
    if behind := host_behind(run.results):
        return behind
    for result in run.results:  # a server without the running gauge is not checked
        reached = result.concurrency_reached()
        short = reached.shortfall() if reached is not None else None
        if short:
            return short
    for result in run.results:
        mismatch = token_mismatch(result.token_account())
        if mismatch:
            return mismatch
    return random_length_mismatch(run.workload, [r for result in run.results for r in result.records])


def _death_reason(run: MeasuredRun, failed: str | None) -> str:
    """A dead server's run (died before the measured window too: its death says it all)."""
    said = f"{run.server_death}; {failed}" if failed else str(run.server_death)
    reason = f"{said}; the figures of a broken run judge nothing"
    if run.server_log:
        shown = "\n".join(f"    {line}" for line in run.server_log)
        reason += f"; its last {len(run.server_log)} log lines:\n{shown}"
    return reason


def host_behind(results: Sequence[RunResult]) -> str | None:
    """Why `results` measured their host rather than the server (the client's or the
    simulator's loop fell behind beyond its bound, or chunks were read in bursts: a client
    whose process was not scheduled, or a buffering proxy), with what to do; None when not."""
    if (behind := _worst(r.client_lag_share() for r in results)) > MAX_CLIENT_LAG:
        return (
            f"the measuring client's event loop ran on average {behind:.0%} of a gap between chunks "
            f"late, its latest probes aside (bound {MAX_CLIENT_LAG:.0%}): chunks were timestamped late; "
            "free the cores, or spread the streams over client processes (RunConfig.workers)"
        )
    if (lag := _worst(r.engine_lag() for r in results)) > MAX_ENGINE_LAG:
        return (
            f"the simulator's engine loop ran {lag:.0%} of a step behind its schedule (bound "
            f"{MAX_ENGINE_LAG:.0%}): the host was too busy for its clock speed x{results[0].clock_speed:g}; "
            "free the cores or lower --llmperf-sim-speed"
        )
    if (bursts := _worst(r.burst_share() for r in results)) > MAX_BURST_SHARE:
        return (
            f"{bursts:.0%} of the gaps between chunks were 0 (bound {MAX_BURST_SHARE:.0%}): chunks "
            "arrived in bursts of already-buffered data, so their times are not when they were made; "
            "measure without a buffering proxy in between (or with one that flushes each event), and "
            "free the client's cores"
        )
    return None


def _worst(values: Iterable[float | None]) -> float:
    """The largest of `values` not None; 0.0 when none is (every bound it is held to is above 0)."""
    return max((v for v in values if v is not None), default=0.0)
