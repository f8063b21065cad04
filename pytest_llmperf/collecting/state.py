"""One object holds what a pytest session of the plugin knows: its options, its PerfSession
(made on first use), and what collection and the session's end found for the hooks that
come after. Registered with pytest's plugin manager as "llmperf-state"; `state_of(config)`
finds it."""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_llmperf.judging.session import PerfSession
    from pytest_llmperf.options import LlmperfOptions
    from pytest_llmperf.servers.spec import ServerSpec

STATE_NAME = "llmperf-state"
NO_TARGET = (
    "no llmperf target chosen: pass --llmperf-sim (the simulated server), --llmperf-gpu, --llmperf-docker, "
    "--llmperf-local [PYTHON], --llmperf-real-cpu or --llmperf-base-url URL (or set the ini twin, e.g. "
    "llmperf_sim = true)"
)


@dataclass(eq=False)  # hashed by identity: pytest keeps registered plugins in sets
class LlmperfState:
    """The plugin's session-wide state. `session`: the PerfSession, made by `perf_session()`
    on first use (a conftest.py may set its own before, as the benchmarks' does)."""

    config: pytest.Config
    options: LlmperfOptions
    session: PerfSession | None = None
    datasets: Any = None  # the datasets the checks before start loaded, for the session
    plan: Any = None  # --llmperf-gpus: the session's plan (plan.py), from the collected tests
    plan_workers: int = 1  # the worker count that plan was made for
    declared: dict[Path, dict[str, ServerSpec]] = field(default_factory=dict)  # per test file: its conftests' servers
    selection_lines: list[str] = field(default_factory=list)  # what --llmperf-servers/--llmperf-shard left out
    deselected: list[pytest.Item] = field(default_factory=list)  # every test deselected (-k, -m, --llmperf-servers)
    asked: Any = None  # the baseline entries the collected tests ask for (unused.py)
    store: Any = None  # --llmperf-store: this session's SharedStore
    document: dict[str, Any] | None = None  # the session's report document, at its end
    end_lines: list[str] = field(default_factory=list)  # what the session's end wrote and found
    report_files: str | None = None  # --llmperf-report: the line saying what was written where

    def perf_session(self) -> PerfSession:
        """The session's PerfSession: the target the hooks make, live progress lines."""
        if self.session is None:
            self.session = _make_session(self)
        return self.session


def state_of(config: pytest.Config) -> LlmperfState:
    state = config.pluginmanager.get_plugin(STATE_NAME)
    assert isinstance(state, LlmperfState), "pytest-llmperf's state is made in pytest_configure"
    return state


def register_state(config: pytest.Config, options: LlmperfOptions) -> LlmperfState:
    state = LlmperfState(config, options)
    config.pluginmanager.register(state, STATE_NAME)
    return state


def _make_session(state: LlmperfState) -> PerfSession:
    from pytest_llmperf.judging.session import PerfSession
    from pytest_llmperf.kinds import TargetContext

    config, options = state.config, state.options
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def log(message: str) -> None:
        # Live, not captured: a model load or a 300 s run must show progress (not under -q).
        if reporter is None or reporter.verbosity < 0:
            return
        with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
            reporter.write_line(f"[llmperf] {message.removeprefix('llmperf: ')}")

    slots = state.plan.gpus_by_server() if state.plan is not None else None
    context = TargetContext(uuid.uuid4().hex[:12], log, gpu_slots=slots)
    target = config.hook.pytest_llmperf_make_target(
        config=config, options=options, kind=options.target_kind, context=context
    )
    live = capture.global_and_fixture_disabled if capture is not None else nullcontext
    shared_history = None
    if options.store:  # the confirmation reads the shared history (xdist workers: their own reader)
        from pytest_llmperf.store.scheme import open_store

        reader = open_store(options.store, Path(config.rootpath))

        def shared_history(target: str) -> list[dict[str, Any]]:
            return reader.history_lines(target=target)

    return PerfSession(
        options,
        target,
        Path(config.rootpath),
        datasets=state.datasets,
        log=log,
        detail=log if config.get_verbosity() > 0 else lambda message: None,  # each run's own lines: -v
        live_output=live,
        shared_history=shared_history,
    )
