"""The collected tests, made ready to run: ordered so each server starts once, left out by
--llmperf-servers and --llmperf-shard, grouped for pytest-xdist (a model's group, or a GPU
slot's under --llmperf-gpus, with the plan), and the lines said after collection."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_llmperf.collecting import xdist_support
from pytest_llmperf.collecting.marker import marker_kwargs, marker_servers, parsed_marker
from pytest_llmperf.collecting.ordering import order_items
from pytest_llmperf.collecting.selection import declared_names, select_servers
from pytest_llmperf.collecting.state import LlmperfState, state_of


def modify_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = state_of(config)
    items[:] = order_items(items, marker_kwargs)
    _select_servers(state, items)
    _select_shard(state, items)
    _group_by_model(state, items)
    _plan_slots(state, items)


def _select_servers(state: LlmperfState, items: list[pytest.Item]) -> None:
    """--llmperf-servers: deselect the tests whose server or base does not match (after the
    ordering hook has checked every marker, the deselected ones too)."""
    options, config = state.options, state.config
    if not options.servers:
        return
    where = "--llmperf-servers" if options.sources.get("llmperf_servers") == "cli" else "ini llmperf_servers"
    declared = declared_names(config.hook.pytest_llmperf_servers(config=config))  # every conftest.py collected
    try:
        selection = select_servers(items, marker_servers, options.servers, declared, where)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if selection.deselected:
        config.hook.pytest_deselected(items=selection.deselected)
        items[:] = selection.kept
    state.selection_lines = [f"[llmperf] {line}" for line in selection.lines]


def _select_shard(state: LlmperfState, items: list[pytest.Item]) -> None:
    """--llmperf-shard K/N: deselect the tests of the other shards (shard.py), so that
    --llmperf-gpus and -n plan this shard's alone. An empty shard runs nothing and passes."""
    options, config = state.options, state.config
    if options.shard is None:
        return
    from pytest_llmperf.collecting.shard import shard_of
    from pytest_llmperf.measuring.preflight import PlannedTest

    tests = []
    for item in items:
        parsed = parsed_marker(item)
        tests.append(parsed.planned(item.nodeid) if parsed is not None else PlannedTest(item.nodeid, (), ()))
    shard = shard_of(
        tests,
        *options.shard,
        repetitions=options.repetitions,
        max_repetitions=options.max_repetitions,
        same_server=options.same_server,
    )
    kept = {id(test) for test in shard.kept}
    if shard.deselected:
        config.hook.pytest_deselected(items=[item for item, test in zip(items, tests) if id(test) not in kept])
        items[:] = [item for item, test in zip(items, tests) if id(test) in kept]
    if shard.empty and tests:
        xdist_support.mark_empty_shard(config)
    state.selection_lines = [*state.selection_lines, *(f"[llmperf] {line}" for line in shard.lines())]


def _group_by_model(state: LlmperfState, items: list[pytest.Item]) -> None:
    """--dist loadgroup: a model's tests form one xdist group, so its servers start on one
    worker, one at a time (--llmperf-gpus: the slot's group instead, from _plan_slots)."""
    if not xdist_support.loadgroup(state.config) or state.options.gpus is not None:
        return
    for item in items:
        server = marker_servers(item).get("server")
        if server is not None:
            item.stash[xdist_support.GROUP_KEY] = f"llmperf-{server.model}"


def _plan_slots(state: LlmperfState, items: list[pytest.Item]) -> None:
    """--llmperf-gpus: the plan of the collected tests (every process that collected them
    makes the same one); under --dist loadgroup each slot's tests form its xdist group, so
    one worker runs them, and that worker starts their servers on the slot's GPUs."""
    from pytest_llmperf.collecting.plan import PlanError, make_plan

    options, config = state.options, state.config
    if options.gpus is None or options.target is None:
        return
    marked = [(item, parsed.planned(item.nodeid)) for item in items if (parsed := parsed_marker(item)) is not None]
    try:
        plan = make_plan(
            [test for _, test in marked],
            options.gpus,
            state.plan_workers,
            repetitions=options.repetitions,
            max_repetitions=options.max_repetitions,
            same_server=options.same_server,
        )
    except PlanError as exc:
        if not xdist_support.is_worker(config):
            raise pytest.UsageError(f"pytest-llmperf: {exc}") from None
        # A worker's usage error crashes xdist's controller (INTERNALERROR): a failed
        # collection report reaches it as it is, and no performance test runs anywhere.
        config.hook.pytest_collectreport(report=pytest.CollectReport("", "failed", f"pytest-llmperf: {exc}", []))
        refused = [item for item, _ in marked]
        config.hook.pytest_deselected(items=refused)
        items[:] = [item for item in items if item not in refused]
        return
    state.plan = plan
    if not xdist_support.loadgroup(config):
        return
    for item, test in marked:
        slot = plan.slot_of(test.servers[0].name) if test.servers else None
        if slot is not None:
            item.stash[xdist_support.GROUP_KEY] = slot.group_name


def collection_lines(config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
    """After collection: what --llmperf-servers deselected, and under --llmperf-sim the
    simulator profile (timing model) each server that will run uses."""
    state = state_of(config)
    lines = state.selection_lines
    chosen = state.options.target_kind
    if chosen is not None and chosen.accepts_sim_args and config.get_verbosity() >= 0:
        from pytest_llmperf.collecting.targets import sim_profile_lines

        specs = [
            spec
            for item in items
            if item.get_closest_marker("llmperf") is not None
            for spec in marker_servers(item).values()
            if spec is not None
        ]
        lines = [*lines, *(f"[llmperf] {line}" for line in sim_profile_lines(state.options, specs))]
    return lines
