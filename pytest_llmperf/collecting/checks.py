"""When collection ends, before any server starts: a local vLLM's interpreter (it imports
vllm), the dataset (found, readable, parses, enough prompts for the largest workload a
collected test declares), the baseline files those tests read, `--llmperf-doctor`, and the
plan and cost said up front. A problem is a usage error saying the fix, not a traceback
after a model load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.collecting import xdist_support
from pytest_llmperf.collecting.marker import check_asserted_names, parsed_marker
from pytest_llmperf.collecting.state import LlmperfState, state_of
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import WORKLOAD_KEYS, declared_datasets


def check_collected(session: pytest.Session) -> None:
    config = session.config
    state = state_of(config)
    options = state.options
    if options.target is None or config.option.collectonly:
        return
    from pytest_llmperf.baselines.outcome import SetupError
    from pytest_llmperf.collecting.targets import baseline_folders_before_start, check_target
    from pytest_llmperf.judging.unused import asked_entries
    from pytest_llmperf.measuring.preflight import check_before_start
    from pytest_llmperf.servers.local_vllm import InterpreterError

    plans = []
    for item in session.items:
        parsed = parsed_marker(item)
        if parsed is None:
            continue
        check_asserted_names(item)
        declared = {k: v for k, v in parsed.kwargs.items() if k in WORKLOAD_KEYS}
        named = None if parsed.workloads else tuple(declared_datasets(declared, options.dataset_name))
        plans.append(parsed.planned(item.nodeid, named))
    unselected = [p for item in state.deselected if (p := parsed_marker(item)) is not None]
    state.asked = asked_entries(
        [(plan.servers, plan.workloads) for plan in plans] + [(p.servers, p.workloads) for p in unselected]
    )
    if not plans:
        return
    if options.doctor:
        _doctor(config, options, [spec for plan in plans for spec in plan.servers])
    try:
        local = check_target(options)  # a local vLLM's interpreter imports vllm
        folders = baseline_folders_before_start(options)
        datasets = check_before_start(options, Path(config.rootpath), plans, folders=folders)
    except (SetupError, InterpreterError) as exc:
        raise pytest.UsageError(str(exc)) from None
    _say_before_start(state, plans, datasets, local)
    state.datasets = datasets


def _say_before_start(state: LlmperfState, plans: list[Any], datasets: dict[Any, Any], local: Any) -> None:
    """The datasets loaded, the local vLLM found, the cost of a paired session and the GPU
    plan: said before anything starts (a worker's plan: with its first report)."""
    config, options = state.config, state.options
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    if reporter.verbosity >= 0:
        from pytest_llmperf.workload.prompts import describe_loaded

        for dataset in datasets.values():
            reporter.write_line(f"[llmperf] dataset {describe_loaded(dataset)}")
        if local is not None:
            reporter.write_line(f"[llmperf] vLLM {local.vllm_version} ({local.platform}) from {local.python}")
    if options.paired:
        from pytest_llmperf.judging.paired import cost_line

        reporter.write_line(f"[llmperf] {cost_line(options, plans)}")
    if state.plan is not None and not xdist_support.is_worker(config):
        for line in state.plan.lines():
            reporter.write_line(f"[llmperf] {line}")
        if options.plan:
            reporter.write_line("[llmperf] --llmperf-plan: nothing started")


def _doctor(config: pytest.Config, options: Any, specs: list[ServerSpec]) -> None:
    """--llmperf-doctor: `llmperf doctor`'s checks for the target and these servers; a
    failed one is a usage error listing the failed lines with their fixes."""
    from pytest_llmperf.commands import doctor

    checks = doctor.run_doctor(doctor.config_from_options(options, specs))
    if doctor.failed(checks):
        raise pytest.UsageError(doctor.usage_error_text(checks))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and reporter.verbosity >= 0:
        for line in doctor.format_checks(checks, ascii_marks=doctor.use_ascii()):
            reporter.write_line(f"[llmperf] doctor: {line}")
