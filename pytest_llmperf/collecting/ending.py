"""The session's end as pytest shows it: each test's JUnit properties and a failure's
one-line verdict; the report document built (on an xdist controller: merged from its
workers'), written, sent to the store and the CI step summary; the terminal summary."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative

from pytest_llmperf.collecting import xdist_support
from pytest_llmperf.collecting.fixture import USED_RUNS_KEY
from pytest_llmperf.collecting.state import LlmperfState, state_of


def record_properties(item: pytest.Item) -> None:
    """The test's key figures and verdicts as JUnit XML properties (pytest's junitxml
    writes item.user_properties, as record_property does)."""
    from pytest_llmperf.report.ci import junit_properties

    perf = state_of(item.config).session
    nodeid = xdist_support.plain_nodeid(item)
    runs = [(run.server.name, run.concurrency, run.figures) for run in item.stash[USED_RUNS_KEY]]
    gates = [
        (gate.server, gate.concurrency, str(gate.outcome), gate.verdicts)
        for gate in (perf.gates if perf is not None else [])
        if gate.nodeid == nodeid
    ]
    item.user_properties.extend(junit_properties(runs, gates))


def explain_failure(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """A verdict table, why a server did not start, a metric name's fix, or running out of
    file descriptors says everything: shown instead of a traceback through the plugin."""
    if call.excinfo is None or not report.failed:
        return
    from pytest_llmperf.baselines.outcome import PerfFailure
    from pytest_llmperf.metrics.registry import UnknownMetric
    from pytest_llmperf.servers.base import ServerStartError
    from pytest_llmperf.workload.runner import TooManyOpenFiles

    if call.excinfo.errisinstance((PerfFailure, ServerStartError, UnknownMetric, TooManyOpenFiles)):
        error = call.excinfo.value
        headline = getattr(error, "headline", None) or next(iter(str(error).splitlines()), type(error).__name__)
        report.longrepr = _explained(item, f"{item.nodeid}\n{error}", headline)


def _explained(item: pytest.Item, text: str, headline: str) -> ReprExceptionInfo:
    """A failure shown as `text` (no traceback) whose crash message, the one line that
    pytest's short test summary (-r), --tb=line and JUnit's failure message show, is
    `headline`. pytest's own form for --tb=native, so xdist carries it to the controller
    as it is."""
    path, lineno, _ = item.location
    return ReprExceptionInfo(
        reprtraceback=ReprTracebackNative([text + "\n"]),
        reprcrash=ReprFileLocation(path, (lineno or 0) + 1, headline),
    )


def finish(session: pytest.Session, *, interrupted: bool, status: int) -> None:
    """The session's servers stopped and its report made, written and sent where asked."""
    config = session.config
    state = state_of(config)
    perf = state.session
    document = None
    if perf is not None:
        from pytest_llmperf.report.document import build_report

        try:
            end = perf.finish(state.asked, interrupted=interrupted)
        finally:
            perf.close()
        state.end_lines = end.lines
        if end.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        document = build_report(perf)
    if xdist_support.is_worker(config):
        # The controller prints the summary and writes the report, from every worker's runs.
        workeroutput: dict[str, Any] = config.workeroutput  # type: ignore[attr-defined]  # xdist sets it on workers
        if document is not None:
            workeroutput[xdist_support.WORKEROUTPUT_KEY] = json.dumps(document)
            workeroutput[xdist_support.END_OUTPUT_KEY] = json.dumps(state.end_lines)
        return
    if xdist_support.is_controller(config):
        from pytest_llmperf.report.document import merge_reports

        reports = config.stash.get(xdist_support.WORKER_REPORTS_KEY, {})
        document = merge_reports(reports)
        ends = config.stash.get(xdist_support.WORKER_END_KEY, {}).values()
        state.end_lines = list(dict.fromkeys(line for lines in ends for line in lines))
    state.document = document
    _write(session, state, document, status)


def _write(session: pytest.Session, state: LlmperfState, document: dict[str, Any] | None, status: int) -> None:
    if state.options.report and document is not None:
        from pytest_llmperf.report.folder import write_report_files

        state.report_files = write_report_files(document, Path(state.options.report)).describe()
    if state.store is not None:  # the store's rows, or a spool when it is lost (the verdicts stand)
        lines = state.store.finish(document, int(session.exitstatus or status), Path(state.config.rootpath))
        state.end_lines = [*state.end_lines, *lines]
    if document is not None:  # once per session: here, never on an xdist worker
        from pytest_llmperf.report.ci import append_step_summary

        append_step_summary(document, os.environ)


def write_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The terminal summary: the tables of the runs and verdicts, the history check, what
    the session's end wrote and found (under -q only the last)."""
    if xdist_support.is_worker(config):
        return
    state = state_of(config)
    options, document = state.options, state.document
    if document is None and options.target is None:
        return
    if terminalreporter.verbosity < 0:  # -q: the failing tests' tables (pytest's failures) and what was written
        for line in state.end_lines:
            terminalreporter.write_line(line)
        return
    terminalreporter.write_sep("=", "llmperf summary")
    terminalreporter.write_line(f"target: {options.target_description()}")
    if document is None:
        terminalreporter.write_line("no performance test ran")
        return
    from pytest_llmperf.report.history import summary_drift_lines  # the history check, after the verdicts
    from pytest_llmperf.report.terminal import terminal_lines

    store_history = None if state.store is None else state.store.store.history_lines
    lines = [
        *terminal_lines(document, warmups=terminalreporter.verbosity > 0),
        *summary_drift_lines(document, config.rootpath, options.history, store_history),
    ]
    for line in [*lines, *state.end_lines]:
        terminalreporter.write_line(line)
    if state.report_files:
        terminalreporter.write_line(state.report_files)
