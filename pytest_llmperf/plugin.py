"""pytest hooks for pytest-llmperf: each delegates to a room of its own.

Options and ini twins (options.py), the session's state (collecting/state.py), the marker
(collecting/marker.py), the collected items (collecting/items.py), the checks before start
(collecting/checks.py), the `llmperf` fixture (collecting/fixture.py), the session's end
and summary (collecting/ending.py), pytest-xdist (xdist_support.py).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.collecting import checks, ending, starting, xdist_support
from pytest_llmperf.collecting import items as _items
from pytest_llmperf.collecting.fixture import USED_RUNS_KEY, LlmperfFixture, benchmark_factory, benchmark_machine_info
from pytest_llmperf.collecting.marker import MARKER_HELP, declared_for, marker_kwargs
from pytest_llmperf.collecting.state import NO_TARGET, STATE_NAME, LlmperfState, register_state, state_of
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
from pytest_llmperf.util.signals import TERMINATE

if TYPE_CHECKING:  # imported when a session starts
    from pytest_llmperf.judging.session import PerfSession
    from pytest_llmperf.kinds import TargetContext, TargetKind
    from pytest_llmperf.servers.base import ServerTarget

__all__ = ["LlmperfFixture", "state_of"]


def _state(config: pytest.Config) -> LlmperfState | None:
    """The state, where configure got as far as making it."""
    found: LlmperfState | None = config.pluginmanager.get_plugin(STATE_NAME)
    return found


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
    config.addinivalue_line("markers", MARKER_HELP)
    try:
        # getoption's default: a flag-valued option is not registered when this plugin was
        # registered after the initial conftests loaded (its ini twin still works).
        options = resolve_options(lambda dest: config.getoption(dest, None), config.getini, _added_kinds(config))
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = register_state(config, options)
    numprocesses = getattr(config.option, "numprocesses", None) or 0
    if options.plan:
        # A dry run: collected here, planned for -n's workers, nothing started. xdist (its
        # configure runs after ours) then starts no workers.
        state.plan_workers = int(numprocesses) or 1
        config.option.dist, config.option.tx = "no", []
        return
    if hasattr(config, "workerinput"):
        state.plan_workers = int(config.workerinput.get("workercount", 1))
    else:
        state.plan_workers = int(numprocesses) or 1
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
    starting.start(session)


def pytest_report_header(config: pytest.Config) -> str:
    options = state_of(config).options
    mode = "update baselines" if options.update_baselines else "compare with baselines"
    if options.paired:
        mode = "paired A/B: NEW judged against OLD on this box (baselines not judged against)"
    return f"llmperf: target {options.target_description()}, profile {options.profile}, {mode}"


@pytest.hookimpl(tryfirst=True)  # the plugin's order first; other plugins may reorder after it
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    _items.modify_items(config, items)


def pytest_report_collectionfinish(config: pytest.Config, items: Sequence[pytest.Item]) -> list[str]:
    return _items.collection_lines(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    checks.check_collected(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    """--llmperf-plan: the plan was printed after collection; no test runs."""
    state = _state(session.config)
    return True if state is not None and state.options.plan and state.options.target is not None else None


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    state = _state(config)
    if state is not None:
        machine_info.update(benchmark_machine_info(state.options, state.session))


@pytest.fixture
def llmperf(request: pytest.FixtureRequest) -> LlmperfFixture:
    state = state_of(request.config)
    if state.options.target is None:
        pytest.skip(NO_TARGET)
    return LlmperfFixture(
        state.perf_session(),
        marker_kwargs(request.node) or {},
        xdist_support.plain_nodeid(request.node),
        state.options.profile,
        benchmark=benchmark_factory(request),
        used=request.node.stash.setdefault(USED_RUNS_KEY, []),
        declared=lambda value: declared_for(request.node, value),
    )


@pytest.fixture(scope="session")
def llmperf_session(request: pytest.FixtureRequest) -> PerfSession:
    """The session's PerfSession (servers, cached runs, gate records), for advanced suites."""
    state = state_of(request.config)
    if state.options.target is None:
        pytest.skip(NO_TARGET)
    return state.perf_session()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    config = item.config
    plan = state_of(config).plan
    if call.when == "setup" and plan is not None and xdist_support.is_worker(config):
        xdist_support.send_plan(config, report, plan)  # the controller collected nothing: it prints a worker's plan
    if call.when == "call" and USED_RUNS_KEY in item.stash:
        ending.record_properties(item)
    ending.explain_failure(item, call, report)
    return report


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items:
        state_of(items[0].config).deselected.extend(items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A SIGTERM from here on must not cut the writes, the servers' stop or the report being
    # written: it is noted, and the session then exits as interrupted.
    TERMINATE.defer()
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and xdist_support.empty_shard(session.config):
        session.exitstatus = pytest.ExitCode.OK  # a CI matrix is of fixed size: shard 7/8 of 6 groups passes
    try:
        if _state(session.config) is not None:
            ending.finish(
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


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _state(config) is not None:
        ending.write_summary(terminalreporter, config)
