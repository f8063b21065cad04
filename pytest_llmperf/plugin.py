"""pytest hooks for pytest-llmperf: options, markers, fixtures, ordering, summary.

Logic lives in plain modules (options, session, ordering, report); this file only
connects them to pytest.
"""

from __future__ import annotations

import difflib
import json
import os
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
from _pytest._code.code import ReprExceptionInfo, ReprFileLocation, ReprTracebackNative

from pytest_llmperf import xdist_support
from pytest_llmperf.baselines.tolerances import parse_tolerances
from pytest_llmperf.metrics.failures import parse_budget
from pytest_llmperf.options import (
    FLAG_VALUED,
    OPTIONS,
    LlmperfOptions,
    Option,
    OptionError,
    join_flag_values,
    read_as_test_path_error,
    resolve_options,
    values_read_as_test_paths,
)
from pytest_llmperf.ordering import order_items
from pytest_llmperf.selection import declared_names, declared_servers, resolve_server, select_servers
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.signals import TERMINATE
from pytest_llmperf.workload.workload import (
    WORKLOAD_KEYS,
    Workload,
    check_workload,
    declared_datasets,
    resolve_workload,
)

if TYPE_CHECKING:  # imported when a session starts
    from pytest_llmperf.kinds import TargetContext, TargetKind
    from pytest_llmperf.measured import MeasuredRun
    from pytest_llmperf.servers.base import ServerTarget
    from pytest_llmperf.session import PerfSession

SESSION_KEY: pytest.StashKey[PerfSession | None] = pytest.StashKey()
OPTIONS_KEY = pytest.StashKey["Any"]()
# The datasets check_before_start loaded at the end of collection, for the session.
DATASET_KEY = pytest.StashKey["Any"]()
REPORT_KEY = pytest.StashKey["dict[str, Any] | None"]()  # the session's report document, at its end
REPORT_FILES_KEY = pytest.StashKey[str]()  # --llmperf-report: the line saying what was written where
# Per test: the marker's server= and base=, names looked up (`marker_servers`).
SERVERS_KEY = pytest.StashKey[dict[str, ServerSpec | None]]()
# Per test file: the servers that the conftest.py files above it declare.
DECLARED_KEY = pytest.StashKey[dict[Path, dict[str, ServerSpec]]]()
SELECTION_KEY = pytest.StashKey[list[str]]()  # what --llmperf-servers deselected, shown after collection
# --llmperf-gpus: the session's plan (plan.py), from the collected tests; the worker count it was made for.
PLAN_KEY = pytest.StashKey["Any"]()
PLAN_WORKERS_KEY = pytest.StashKey[int]()
# Per test: the runs its llmperf fixture handed out (for its JUnit properties).
USED_RUNS_KEY = pytest.StashKey["list[MeasuredRun]"]()
DESELECTED_KEY = pytest.StashKey[list[pytest.Item]]()  # every test deselected (-k, -m, --llmperf-servers)
ASKED_KEY = pytest.StashKey["Any"]()  # the baseline entries the collected tests ask for (unused.py)
END_KEY = pytest.StashKey[list[str]]()  # what the session's end wrote and found
STORE_KEY = pytest.StashKey["Any"]()  # --llmperf-store: this session's SharedStore (store/shared.py)
MARKER_KEYS = ("server", "base", "tolerances", "error_budget", *WORKLOAD_KEYS)
NO_TARGET = (
    "no llmperf target chosen: pass --llmperf-sim (the simulated server), --llmperf-gpu, --llmperf-docker, "
    "--llmperf-local [PYTHON], --llmperf-real-cpu or --llmperf-base-url URL (or set the ini twin, e.g. "
    "llmperf_sim = true)"
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_llmperf import hooks

    pluginmanager.add_hookspecs(hooks)


def _add_option(parser: pytest.Parser, opt: Option) -> None:
    group = parser.getgroup("llmperf", "LLM serving performance regression tests")
    text = opt.help.replace("%", "%%")  # argparse %-formats help text ('5%' broke --help)
    if opt.kind == "bool":
        group.addoption(*opt.flags, action="store_true", default=None, dest=opt.dest, help=text)
    elif opt.const is not None:  # the value may be left out: --llmperf-local [PYTHON]
        group.addoption(
            *opt.flags,
            action="store",
            nargs="?",
            const=opt.const,
            default=None,
            dest=opt.dest,
            help=text,
            metavar=opt.kind.upper(),
        )
    else:
        group.addoption(*opt.flags, action="store", default=None, dest=opt.dest, help=text)


def pytest_addoption(parser: pytest.Parser) -> None:
    for opt in OPTIONS:
        if opt.dest not in FLAG_VALUED:  # those: in pytest_load_initial_conftests
            _add_option(parser, opt)
        parser.addini(opt.ini, help=opt.help, type="string", default="")
    parser.addini(
        "llmperf_tolerances",
        type="linelist",
        default=[],
        help="per-project tolerances, one 'metric = tolerance' per line, e.g. 'decode_tok_s = 3%'",
    )


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """`--llmperf-sim-args --disable-log-stats` (one flag as the value). pytest parses the
    command line with the options registered so far before this hook, where argparse would
    take that value for an option and stop ("expected one argument"); unregistered, both
    are left as unknown flags. Here, with the command line's final list (addopts included),
    the pair becomes `--llmperf-sim-args=--disable-log-stats`, and the option is registered
    for pytest's last, full parse (when conftests add theirs)."""
    join_flag_values(args)
    if not early_config.known_args_namespace.file_or_dir:  # no test path: a value decided the rootdir
        found = values_read_as_test_paths(args, early_config.invocation_params.dir)
        if found:
            raise pytest.UsageError(str(read_as_test_path_error(found)))
    for opt in OPTIONS:
        if opt.dest in FLAG_VALUED:
            _add_option(parser, opt)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "llmperf(server=NAME, base=NAME, num_prompts=, max_tokens=, max_seconds=, slos='ttft:500', tolerances={}, "
        "...): "
        "a performance test against a declared server",
    )
    try:
        # getoption's default: a flag-valued option is not registered when this plugin was
        # registered after the initial conftests loaded (its ini twin still works).
        options = resolve_options(lambda dest: config.getoption(dest, None), config.getini, _added_kinds(config))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[OPTIONS_KEY] = options
    config.stash[SESSION_KEY] = None
    numprocesses = getattr(config.option, "numprocesses", None) or 0
    if options.plan:
        # A dry run: collected here, planned for -n's workers, nothing started. xdist (its
        # configure runs after ours) then starts no workers.
        config.stash[PLAN_WORKERS_KEY] = int(numprocesses) or 1
        config.option.dist, config.option.tx = "no", []
        return
    if hasattr(config, "workerinput"):
        config.stash[PLAN_WORKERS_KEY] = int(config.workerinput.get("workercount", 1))
    else:
        config.stash[PLAN_WORKERS_KEY] = int(numprocesses) or 1
        if numprocesses and options.gpus is not None:
            config.pluginmanager.register(xdist_support.WorkersPlan(config), "llmperf-workers-plan")
    xdist_support.check_numprocesses(config, options)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(xdist_support.XdistHooks(options), "llmperf-xdist")


def _added_kinds(config: pytest.Config) -> list[TargetKind]:
    """The target kinds conftest.py files and plugins add (pytest_llmperf_target_kinds)."""
    from pytest_llmperf.kinds import TargetKind

    added = [k for found in config.hook.pytest_llmperf_target_kinds(config=config) for k in found or ()]
    wrong = [k for k in added if not isinstance(k, TargetKind)]
    if wrong:
        raise pytest.UsageError(f"pytest_llmperf_target_kinds must return TargetKind records, got {wrong[0]!r}")
    return added


@pytest.hookimpl(trylast=True)
def pytest_llmperf_make_target(options: LlmperfOptions, kind: TargetKind, context: TargetContext) -> ServerTarget:
    """The kind's own factory, when no conftest.py or plugin built the target first."""
    return kind.factory(options, context)


def pytest_sessionstart(session: pytest.Session) -> None:
    options = session.config.stash[OPTIONS_KEY]
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
        from pytest_llmperf.targets import cleanup_leftover_containers

        try:
            lines = cleanup_leftover_containers(options.cleanup_age)
        except RuntimeError as exc:
            raise pytest.UsageError(f"--llmperf-cleanup: {exc}") from None
    elif options.target is not None and options.target_kind.containers:  # a session that talks to Docker anyway
        from pytest_llmperf.targets import leftover_report

        lines = leftover_report(options.cleanup_age)
    else:
        return
    if reporter is not None:
        for line in lines:
            reporter.write_line(f"[llmperf] {line}")


def _begin_store(config: pytest.Config, options: Any) -> list[str]:
    """--llmperf-store: the store its URL's scheme names, reached and this session's start
    recorded before anything is collected or started (store/startup.py)."""
    from pytest_llmperf.measurer import git_commit
    from pytest_llmperf.store.startup import begin_store

    config.stash[STORE_KEY], lines = begin_store(options, Path(config.rootpath), git_commit(Path(config.rootpath)))
    return lines


def pytest_report_header(config: pytest.Config) -> str:
    options = config.stash[OPTIONS_KEY]
    mode = "update baselines" if options.update_baselines else "compare with baselines"
    if options.paired:
        mode = "paired A/B: NEW judged against OLD on this box (baselines not judged against)"
    return f"llmperf: target {options.target_description()}, profile {options.profile}, {mode}"


@dataclass(frozen=True)
class ParsedMarker:
    """A test's llmperf marker, checked once at collection and kept on the item."""

    kwargs: dict[str, Any]  # its keyword arguments, server= and base= as ServerSpecs
    workloads: tuple[Workload, ...]  # at its concurrency parameter; empty: known when it runs


MARKER_KEY = pytest.StashKey[ParsedMarker]()


def parsed_marker(item: pytest.Item) -> ParsedMarker | None:
    """The test's marker, checked (keys, servers, tolerances, error budget, workload values)
    on first use; pytest.UsageError names the test and the fix. None: no marker."""
    if MARKER_KEY in item.stash:
        return item.stash[MARKER_KEY]
    marker = item.get_closest_marker("llmperf")
    if marker is None:
        return None
    if marker.args:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.llmperf takes keyword arguments only")
    unknown = set(marker.kwargs) - set(MARKER_KEYS)
    if unknown:
        close = sorted({m for name in unknown for m in difflib.get_close_matches(name, MARKER_KEYS, n=1, cutoff=0.6)})
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise pytest.UsageError(
            f"{item.nodeid}: unknown @pytest.mark.llmperf argument(s) {sorted(unknown)}; {hint}"
            f"known: {list(MARKER_KEYS)}"
        )
    servers = marker_servers(item)
    try:
        parse_tolerances(marker.kwargs.get("tolerances") or {}, f"{item.nodeid}: llmperf tolerances: ")
        if marker.kwargs.get("error_budget") is not None:
            parse_budget(marker.kwargs["error_budget"])
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    parsed = ParsedMarker({**marker.kwargs, **servers}, tuple(planned_workloads(item, marker.kwargs)))
    item.stash[MARKER_KEY] = parsed
    return parsed


def marker_kwargs(item: pytest.Item) -> dict[str, Any] | None:
    """The marker's keyword arguments, checked, server= and base= as ServerSpecs (None: no marker)."""
    parsed = parsed_marker(item)
    return parsed.kwargs if parsed is not None else None


def marker_servers(item: pytest.Item) -> dict[str, ServerSpec | None]:
    """The marker's server= and base= as ServerSpecs: a name is looked up among the servers
    that the conftest.py files above the test declare (their pytest_llmperf_servers hook,
    called through the test's own hook proxy, which leaves out other folders' conftests)."""
    if SERVERS_KEY in item.stash:
        return item.stash[SERVERS_KEY]
    marker = item.get_closest_marker("llmperf")
    given = {key: marker.kwargs[key] for key in ("server", "base") if key in marker.kwargs} if marker else {}
    try:
        resolved = {key: resolve_server(key, value, _declared_for(item, value)) for key, value in given.items()}
    except ValueError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
    item.stash[SERVERS_KEY] = resolved
    return resolved


def _declared_for(item: pytest.Item, value: object) -> dict[str, ServerSpec]:
    """The servers the conftest.py files above `item` declare, looked up (once per folder)
    only when `value` is a name to find among them."""
    cache = item.config.stash.setdefault(DECLARED_KEY, {})
    if isinstance(value, str) and item.path not in cache:
        cache[item.path] = declared_servers(item.ihook.pytest_llmperf_servers(config=item.config))
    return cache.get(item.path, {})


def _check_asserted_names(item: pytest.Item) -> None:
    """The metric names a test asserts in literal strings, before any server starts."""
    from pytest_llmperf.asserted_names import check_function

    function = getattr(item, "function", None)
    problems = check_function(function) if function is not None else []
    if problems:
        raise pytest.UsageError("\n".join(f"{item.nodeid} (line {line}): {problem}" for line, problem in problems))


def planned_workloads(item: pytest.Item, kwargs: Mapping[str, Any]) -> list[Workload]:
    """The workloads a marked test will run, as far as collection can tell: its marker's,
    at its `concurrency` parameter when it has one (the usual parametrize). Checks every
    workload value of the marker either way; pytest.UsageError names the test and the fix.
    A test without that parameter gives none: its concurrency is known when it runs."""
    declared = {k: v for k, v in kwargs.items() if k in WORKLOAD_KEYS}
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    options = item.config.stash[OPTIONS_KEY]
    try:
        check_workload(declared)
        if "concurrency" not in params:
            return []
        return [
            resolve_workload(
                declared,
                params["concurrency"],
                options.profile,
                options.warmup,
                options.slos,
                dataset=(options.dataset_name, options.dataset),
            )
        ]
    except ValueError as exc:
        where = " (its concurrency parameter)" if str(exc).startswith("concurrency") else ""
        raise pytest.UsageError(f"{item.nodeid}{where}: {exc}") from None


@pytest.hookimpl(tryfirst=True)  # the plugin's order first; other plugins may reorder after it
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = order_items(items, marker_kwargs)
    _select_servers(config, items)
    _select_shard(config, items)
    _group_by_model(config, items)
    _plan_slots(config, items)


def _select_servers(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--llmperf-servers: deselect the tests whose server or base does not match (after the
    ordering hook has checked every marker, the deselected ones too)."""
    options = config.stash[OPTIONS_KEY]
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
    config.stash[SELECTION_KEY] = [f"[llmperf] {line}" for line in selection.lines]


def _select_shard(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--llmperf-shard K/N: deselect the tests of the other shards (shard.py), so that
    --llmperf-gpus and -n plan this shard's alone. An empty shard runs nothing and passes."""
    options = config.stash[OPTIONS_KEY]
    if options.shard is None:
        return
    from pytest_llmperf.preflight import PlannedTest
    from pytest_llmperf.shard import shard_of

    tests = []
    for item in items:
        parsed = parsed_marker(item)
        kwargs = parsed.kwargs if parsed is not None else {}
        servers = tuple(spec for spec in (kwargs.get("server"), kwargs.get("base")) if spec is not None)
        tests.append(PlannedTest(item.nodeid, servers, parsed.workloads if parsed is not None else ()))
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
    config.stash[SELECTION_KEY] = [
        *config.stash.get(SELECTION_KEY, []),
        *(f"[llmperf] {line}" for line in shard.lines()),
    ]


def pytest_report_collectionfinish(config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
    """After collection: what --llmperf-servers deselected, and under --llmperf-sim the
    simulator profile (timing model) each server that will run uses."""
    lines = config.stash.get(SELECTION_KEY, [])
    chosen = config.stash[OPTIONS_KEY].target_kind
    if chosen is not None and chosen.accepts_sim_args and config.get_verbosity() >= 0:
        from pytest_llmperf.targets import sim_profile_lines

        specs = [
            spec
            for item in items
            if item.get_closest_marker("llmperf") is not None
            for spec in marker_servers(item).values()
            if spec is not None
        ]
        lines = [*lines, *(f"[llmperf] {line}" for line in sim_profile_lines(config.stash[OPTIONS_KEY], specs))]
    return lines


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any server starts: a local vLLM's interpreter (it imports vllm), the dataset
    (found, readable, parses, enough prompts for the largest workload a collected test
    declares) and the baseline files those tests read. A problem is a usage error saying
    the fix, not a traceback after a model load."""
    config = session.config
    options = config.stash[OPTIONS_KEY]
    if options.target is None or config.option.collectonly:
        return
    from pytest_llmperf.outcome import SetupError
    from pytest_llmperf.preflight import PlannedTest, check_before_start
    from pytest_llmperf.servers.local_vllm import InterpreterError
    from pytest_llmperf.targets import baseline_folders_before_start, check_target

    plans = []
    for item in session.items:
        parsed = parsed_marker(item)
        if parsed is None:
            continue
        _check_asserted_names(item)
        kwargs, workloads = parsed.kwargs, parsed.workloads
        servers = tuple(spec for spec in (kwargs.get("server"), kwargs.get("base")) if spec is not None)
        declared = {k: v for k, v in kwargs.items() if k in WORKLOAD_KEYS}
        named = None if workloads else tuple(declared_datasets(declared, options.dataset_name))
        plans.append(PlannedTest(item.nodeid, servers, workloads, named))
    from pytest_llmperf.unused import asked_entries

    unselected = [p for item in config.stash.get(DESELECTED_KEY, []) if (p := parsed_marker(item)) is not None]
    config.stash[ASKED_KEY] = asked_entries(
        [(plan.servers, plan.workloads) for plan in plans]
        + [
            (tuple(s for s in (p.kwargs.get("server"), p.kwargs.get("base")) if s is not None), p.workloads)
            for p in unselected
        ]
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
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and reporter.verbosity >= 0:
        from pytest_llmperf.workload.prompts import describe_loaded

        for dataset in datasets.values():
            reporter.write_line(f"[llmperf] dataset {describe_loaded(dataset)}")
        if local is not None:
            reporter.write_line(f"[llmperf] vLLM {local.vllm_version} ({local.platform}) from {local.python}")
    if reporter is not None and options.paired:  # the cost, said before anything starts
        from pytest_llmperf.paired import cost_line

        reporter.write_line(f"[llmperf] {cost_line(options, plans)}")
    plan = config.stash.get(PLAN_KEY, None)
    if (
        reporter is not None and plan is not None and not xdist_support.is_worker(config)
    ):  # a worker's: with its first report
        for line in plan.lines():
            reporter.write_line(f"[llmperf] {line}")
        if options.plan:
            reporter.write_line("[llmperf] --llmperf-plan: nothing started")
    config.stash[DATASET_KEY] = datasets


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """--llmperf-plan: the plan was printed after collection; no test runs."""
    options = session.config.stash.get(OPTIONS_KEY, None)
    return True if options is not None and options.plan and options.target is not None else None


def _doctor(config: pytest.Config, options: Any, specs: list[ServerSpec]) -> None:
    """--llmperf-doctor: `llmperf doctor`'s checks for the target and these servers; a
    failed one is a usage error listing the failed lines with their fixes."""
    from pytest_llmperf import doctor

    checks = doctor.run_doctor(doctor.config_from_options(options, specs))
    if doctor.failed(checks):
        raise pytest.UsageError(doctor.usage_error_text(checks))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and reporter.verbosity >= 0:
        for line in doctor.format_checks(checks, ascii_marks=doctor.use_ascii()):
            reporter.write_line(f"[llmperf] doctor: {line}")


def _group_by_model(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--dist loadgroup: a model's tests form one xdist group, so its servers start on one
    worker, one at a time (--llmperf-gpus: the slot's group instead, from _plan_slots)."""
    if not xdist_support.loadgroup(config) or config.stash[OPTIONS_KEY].gpus is not None:
        return
    for item in items:
        server = marker_servers(item).get("server")
        if server is not None:
            item.stash[xdist_support.GROUP_KEY] = f"llmperf-{server.model}"


def _plan_slots(config: pytest.Config, items: list[pytest.Item]) -> None:
    """--llmperf-gpus: the plan of the collected tests (every process that collected them
    makes the same one); under --dist loadgroup each slot's tests form its xdist group, so
    one worker runs them, and that worker starts their servers on the slot's GPUs."""
    from pytest_llmperf.plan import PlanError, make_plan
    from pytest_llmperf.preflight import PlannedTest

    options = config.stash[OPTIONS_KEY]
    if options.gpus is None or options.target is None:
        return
    marked = []
    for item in items:
        parsed = parsed_marker(item)
        if parsed is None:
            continue
        servers = tuple(spec for spec in (parsed.kwargs.get("server"), parsed.kwargs.get("base")) if spec is not None)
        marked.append((item, PlannedTest(item.nodeid, servers, parsed.workloads)))
    tests = [test for _, test in marked]
    try:
        plan = make_plan(
            tests,
            options.gpus,
            config.stash[PLAN_WORKERS_KEY],
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
    config.stash[PLAN_KEY] = plan
    if not xdist_support.loadgroup(config):
        return
    for item, test in marked:
        slot = plan.slot_of(test.servers[0].name) if test.servers else None
        if slot is not None:
            item.stash[xdist_support.GROUP_KEY] = slot.group_name


def _perf_session(config: pytest.Config) -> Any:
    from pytest_llmperf.kinds import TargetContext
    from pytest_llmperf.session import PerfSession

    perf = config.stash[SESSION_KEY]
    if perf is None:
        options = config.stash[OPTIONS_KEY]
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")

        def log(message: str) -> None:
            # Live, not captured: a model load or a 300 s run must show progress (not under -q).
            if reporter is None or reporter.verbosity < 0:
                return
            with capture.global_and_fixture_disabled() if capture is not None else nullcontext():
                reporter.write_line(f"[llmperf] {message.removeprefix('llmperf: ')}")

        plan = config.stash.get(PLAN_KEY, None)
        slots = plan.gpus_by_server() if plan is not None else None
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

        perf = PerfSession(
            options,
            target,
            Path(config.rootpath),
            datasets=config.stash.get(DATASET_KEY, None),
            log=log,
            detail=log if config.get_verbosity() > 0 else lambda message: None,  # each run's own lines: -v
            live_output=live,
            shared_history=shared_history,
        )
        config.stash[SESSION_KEY] = perf
    return perf


class LlmperfFixture:
    """What a performance test receives: `llmperf.run(concurrency=...)`."""

    def __init__(
        self,
        perf: PerfSession,
        kwargs: dict[str, Any],
        nodeid: str,
        profile: str,
        benchmark: Callable[[], Any] | None = None,
        used: list[MeasuredRun] | None = None,
        declared: Callable[[object], Mapping[str, ServerSpec]] = lambda name: {},
    ) -> None:
        self._perf = perf
        self._declared = declared  # the servers declared for this test, where a name is given
        self._used = used if used is not None else []  # the runs this test got, for its JUnit properties
        self._kwargs = kwargs
        self._nodeid = nodeid
        self._profile = profile
        self._warmup = perf.options.warmup  # --llmperf-warmup: where the marker gives none
        self._slos = perf.options.slos  # --llmperf-slos: where the marker gives none
        self._benchmark = benchmark  # pytest-benchmark's fixture, fetched only when used
        self.server: ServerSpec | None = kwargs.get("server")
        self.base: ServerSpec | None = kwargs.get("base")

    def run(self, concurrency: int, server: ServerSpec | str | None = None, **workload: Any) -> MeasuredRun:
        """A bad argument fails the test in one line that says which and how to fix it,
        before any server starts; `server`: a ServerSpec or a declared server's name."""
        try:
            spec = resolve_server("server", server, self._declared(server)) if server is not None else self.server
        except ValueError as exc:
            self._refuse(f"llmperf.run(): {str(exc).removeprefix('llmperf ')}")
        if spec is None:
            self._refuse("llmperf.run() needs server= (or @pytest.mark.llmperf(server=...))")
        declared = {k: v for k, v in self._kwargs.items() if k in WORKLOAD_KEYS}
        declared.update(workload)
        try:
            options = self._perf.options
            resolved = resolve_workload(
                declared,
                concurrency,
                self._profile,
                self._warmup,
                self._slos,
                dataset=(options.dataset_name, options.dataset),
                where="llmperf.run()",  # the marker's own values were checked at collection
            )
        except ValueError as exc:
            self._refuse(str(exc))
        from pytest_llmperf.outcome import SetupError

        try:
            if self._benchmark is not None and not self._perf.is_cached(spec, resolved):
                measured = _run_under_benchmark(self._benchmark(), self._perf.run, spec, resolved)
                self._benchmark = None  # pytest-benchmark times one call per test
            else:
                measured = self._perf.run(spec, resolved)
        except SetupError as exc:  # what only a running server could tell (its token counts)
            self._refuse(str(exc))
        self._used.append(measured)
        return self._perf.bind(measured, self._nodeid, self._kwargs.get("tolerances"), self._kwargs.get("error_budget"))

    def _refuse(self, message: str) -> NoReturn:
        pytest.fail(f"{self._nodeid}: {message}", pytrace=False)


def _run_under_benchmark(benchmark: Any, run: Callable[..., Any], spec: ServerSpec, workload: Any) -> Any:
    """Time the run as one pytest-benchmark round and put its figures in extra_info."""
    measured = benchmark.pedantic(run, args=(spec, workload), rounds=1, iterations=1)
    benchmark.extra_info.update(
        llmperf_server=spec.name,
        llmperf_concurrency=workload.concurrency,
        llmperf_workload=workload.to_dict(),
        llmperf_metrics={k: v for k, v in measured.figures.items() if v is not None},
        llmperf_vllm_version=measured.provenance.get("vllm_version"),
    )
    return measured


# pytest-benchmark's options that ask for its output: a run is timed into it only then.
BENCHMARK_ASKED = ("benchmark_json", "benchmark_save", "benchmark_autosave", "benchmark_compare", "benchmark_enable")


def _benchmark_factory(request: pytest.FixtureRequest) -> Callable[[], Any] | None:
    """pytest-benchmark's fixture, without requiring that plugin, when the user asked for
    its output (--benchmark-json, --benchmark-save, --benchmark-autosave,
    --benchmark-compare, or --benchmark-enable). Installed is not asking: a one-round
    timing of a whole run adds nothing to the plugin's own figures but a 200-column table."""
    config = request.config
    if not config.pluginmanager.hasplugin("benchmark"):
        return None
    if not any(config.getoption(name, None) for name in BENCHMARK_ASKED):
        return None
    disabled = config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)
    if config.getoption("benchmark_skip", False) or disabled:
        return None
    return lambda: request.getfixturevalue("benchmark")


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    perf = config.stash.get(SESSION_KEY, None)
    options = config.stash.get(OPTIONS_KEY, None)
    machine_info["llmperf_target"] = options.target if options else None
    if perf is not None:
        gpu = {k: v for run in perf.runs.values() for k, v in run.provenance.items() if k.startswith("gpu_")}
        machine_info.update({f"llmperf_{k}": v for k, v in gpu.items()})


@pytest.fixture
def llmperf(request: pytest.FixtureRequest) -> LlmperfFixture:
    options = request.config.stash[OPTIONS_KEY]
    if options.target is None:
        pytest.skip(NO_TARGET)
    kwargs = marker_kwargs(request.node) or {}
    return LlmperfFixture(
        _perf_session(request.config),
        kwargs,
        xdist_support.plain_nodeid(request.node),
        options.profile,
        benchmark=_benchmark_factory(request),
        used=request.node.stash.setdefault(USED_RUNS_KEY, []),
        declared=lambda value: _declared_for(request.node, value),
    )


@pytest.fixture(scope="session")
def llmperf_session(request: pytest.FixtureRequest) -> Any:
    """The session's PerfSession (servers, cached runs, gate records), for advanced suites."""
    if request.config.stash[OPTIONS_KEY].target is None:
        pytest.skip(NO_TARGET)
    return _perf_session(request.config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    config = item.config
    if (
        call.when == "setup"
        and xdist_support.is_worker(config)
        and not config.stash.get(xdist_support.PLAN_SHOWN_KEY, False)
    ):
        plan = config.stash.get(PLAN_KEY, None)
        if plan is not None:  # the controller collected nothing: it prints this worker's plan
            report.llmperf_plan = plan.lines()  # type: ignore[attr-defined]  # xdist carries report attributes
            config.stash[xdist_support.PLAN_SHOWN_KEY] = True
    if call.when == "call" and USED_RUNS_KEY in item.stash:
        _record_properties(item)
    # A verdict table, why a server did not start, a metric name's fix, or running out of
    # file descriptors says everything: show it instead of a traceback through the plugin.
    if call.excinfo is not None and report.failed:
        from pytest_llmperf.metrics.registry import UnknownMetric
        from pytest_llmperf.outcome import PerfFailure
        from pytest_llmperf.servers.base import ServerStartError
        from pytest_llmperf.workload.runner import TooManyOpenFiles

        if call.excinfo.errisinstance((PerfFailure, ServerStartError, UnknownMetric, TooManyOpenFiles)):
            error = call.excinfo.value
            headline = getattr(error, "headline", None) or next(iter(str(error).splitlines()), type(error).__name__)
            report.longrepr = _explained(item, f"{item.nodeid}\n{error}", headline)
    return report


def _record_properties(item: pytest.Item) -> None:
    """The test's key figures and verdicts as JUnit XML properties (pytest's junitxml
    writes item.user_properties, as record_property does)."""
    from pytest_llmperf.report.ci import junit_properties

    perf = item.config.stash[SESSION_KEY]
    nodeid = xdist_support.plain_nodeid(item)
    runs = [(run.server.name, run.concurrency, run.figures) for run in item.stash[USED_RUNS_KEY]]
    gates = [
        (gate.server, gate.concurrency, str(gate.outcome), gate.verdicts)
        for gate in (perf.gates if perf is not None else [])
        if gate.nodeid == nodeid
    ]
    item.user_properties.extend(junit_properties(runs, gates))


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


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items:
        items[0].config.stash.setdefault(DESELECTED_KEY, []).extend(items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A SIGTERM from here on must not cut the writes, the servers' stop or the report being
    # written: it is noted, and the session then exits as interrupted.
    TERMINATE.defer()
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and xdist_support.empty_shard(session.config):
        session.exitstatus = pytest.ExitCode.OK  # a CI matrix is of fixed size: shard 7/8 of 6 groups passes
    try:
        _finish(
            session,
            interrupted=exitstatus == pytest.ExitCode.INTERRUPTED or bool(TERMINATE.received),
            status=exitstatus,
        )
    finally:
        if TERMINATE.received and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        TERMINATE.restore()


def pytest_unconfigure(config: pytest.Config) -> None:
    TERMINATE.restore()  # when the session never finished (a usage error after it started)


def _finish(session: pytest.Session, *, interrupted: bool, status: int) -> None:
    config = session.config
    perf = config.stash.get(SESSION_KEY, None)
    document = None
    if perf is not None:
        from pytest_llmperf.report.document import build_report

        try:
            end = perf.finish(config.stash.get(ASKED_KEY, None), interrupted=interrupted)
        finally:
            perf.close()
        config.stash[END_KEY] = end.lines
        if end.failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        document = build_report(perf)
    if xdist_support.is_worker(config):
        # The controller prints the summary and writes the report, from every worker's runs.
        workeroutput: dict[str, Any] = config.workeroutput  # type: ignore[attr-defined]  # xdist sets it on workers
        if document is not None:
            workeroutput[xdist_support.WORKEROUTPUT_KEY] = json.dumps(document)
            workeroutput[xdist_support.END_OUTPUT_KEY] = json.dumps(config.stash[END_KEY])
        return
    if xdist_support.is_controller(config):
        from pytest_llmperf.report.document import merge_reports

        reports = config.stash.get(xdist_support.WORKER_REPORTS_KEY, {})
        document = merge_reports(reports)
        ends = config.stash.get(xdist_support.WORKER_END_KEY, {}).values()
        config.stash[END_KEY] = list(dict.fromkeys(line for lines in ends for line in lines))
    config.stash[REPORT_KEY] = document
    report_path = config.stash[OPTIONS_KEY].report
    if report_path and document is not None:
        from pytest_llmperf.report.folder import write_report_files

        config.stash[REPORT_FILES_KEY] = write_report_files(document, Path(report_path)).describe()
    shared = config.stash.get(STORE_KEY, None)
    if shared is not None:  # the store's rows, or a spool when it is lost (the verdicts stand)
        lines = shared.finish(document, int(session.exitstatus or status), Path(config.rootpath))
        config.stash[END_KEY] = [*config.stash.get(END_KEY, []), *lines]
    if document is not None:  # once per session: here, never on an xdist worker
        from pytest_llmperf.report.ci import append_step_summary

        append_step_summary(document, os.environ)


def _store_history(config: pytest.Config) -> Callable[[], list[dict[str, Any]]] | None:
    shared = config.stash.get(STORE_KEY, None)
    return None if shared is None else shared.store.history_lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if xdist_support.is_worker(config):
        return
    options = config.stash.get(OPTIONS_KEY, None)
    document = config.stash.get(REPORT_KEY, None)
    if options is None or (document is None and options.target is None):
        return
    from pytest_llmperf.report.terminal import terminal_lines

    if terminalreporter.verbosity < 0:  # -q: the failing tests' tables (pytest's failures) and what was written
        for line in config.stash.get(END_KEY, []):
            terminalreporter.write_line(line)
        return
    terminalreporter.write_sep("=", "llmperf summary")
    terminalreporter.write_line(f"target: {options.target_description()}")
    if document is None:
        terminalreporter.write_line("no performance test ran")
        return
    from pytest_llmperf.report.history import summary_drift_lines  # the history check, after the verdicts

    lines = [
        *terminal_lines(document, warmups=terminalreporter.verbosity > 0),
        *summary_drift_lines(document, config.rootpath, options.history, _store_history(config)),
    ]
    for line in [*lines, *config.stash.get(END_KEY, [])]:
        terminalreporter.write_line(line)
    written = config.stash.get(REPORT_FILES_KEY, None)
    if written:
        terminalreporter.write_line(written)
