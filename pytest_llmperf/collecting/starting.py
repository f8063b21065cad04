"""The session's start: SIGTERM made a clean stop, the shared store reached and this
session's start recorded (--llmperf-store), leftover containers cleaned or reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.collecting.state import state_of
from pytest_llmperf.util.signals import TERMINATE


def start(session: pytest.Session) -> None:
    """SIGTERM handled as Ctrl-C; the shared store reached before anything starts; leftover
    containers cleaned or reported."""
    options = state_of(session.config).options
    if options.target is not None:
        # SIGTERM (a CI timeout, `kill`) then stops the session as Ctrl-C does: the run in
        # progress is kept as a partial result, servers stop, the report is written, and
        # pytest exits with code 2. Restored when the session ends.
        TERMINATE.install()
    if hasattr(session.config, "workerinput"):  # xdist: the controller cleans and reports
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if options.store and options.target is not None and not (session.config.option.collectonly or options.plan):
        for line in _begin_store(session.config, options):
            if reporter is not None:
                reporter.write_line(f"[llmperf] {line}")
    if options.cleanup:
        from pytest_llmperf.collecting.targets import cleanup_leftover_containers

        try:
            lines = cleanup_leftover_containers(options.cleanup_age)
        except RuntimeError as exc:
            raise pytest.UsageError(f"--llmperf-cleanup: {exc}") from None
    elif options.target_kind is not None and options.target_kind.containers:  # a session that talks to Docker anyway
        from pytest_llmperf.collecting.targets import leftover_report

        lines = leftover_report(options.cleanup_age)
    else:
        return
    if reporter is not None:
        for line in lines:
            reporter.write_line(f"[llmperf] {line}")


def _begin_store(config: pytest.Config, options: Any) -> list[str]:
    """--llmperf-store: the store its URL's scheme names, reached and this session's start
    recorded before anything is collected or started (store/startup.py)."""
    from pytest_llmperf.measuring.measurer import git_commit
    from pytest_llmperf.store.startup import begin_store

    state_of(config).store, lines = begin_store(options, Path(config.rootpath), git_commit(Path(config.rootpath)))
    return lines
