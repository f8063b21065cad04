"""A test's `@pytest.mark.llmperf`, parsed once at collection into a `ParsedMarker` kept on
the item: its keys checked, its servers looked up by name among the declared ones, its
tolerances, error budget and workload values checked, its planned runs. A problem is a
pytest.UsageError naming the test and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.baselines.tolerances import parse_tolerances
from pytest_llmperf.collecting.selection import declared_servers, resolve_server
from pytest_llmperf.collecting.state import state_of
from pytest_llmperf.metrics.failures import parse_budget
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import WORKLOAD_KEYS, Workload, check_workload, resolve_workload

if TYPE_CHECKING:
    from pytest_llmperf.measuring.preflight import PlannedTest

MARKER_KEYS = ("server", "base", "tolerances", "error_budget", *WORKLOAD_KEYS)
MARKER_HELP = (
    "llmperf(server=NAME, base=NAME, num_prompts=, max_tokens=, max_seconds=, slos='ttft:500', tolerances={}, "
    "...): a performance test against a declared server"
)


@dataclass(frozen=True)
class ParsedMarker:
    """A test's llmperf marker, checked once at collection and kept on the item."""

    kwargs: dict[str, Any]  # its keyword arguments, server= and base= as ServerSpecs
    workloads: tuple[Workload, ...]  # at its concurrency parameter; empty: known when it runs

    @property
    def servers(self) -> tuple[ServerSpec, ...]:
        """Its server, then its base, where given."""
        return tuple(spec for spec in (self.kwargs.get("server"), self.kwargs.get("base")) if spec is not None)

    def planned(self, nodeid: str, datasets: tuple[Any, ...] | None = None) -> PlannedTest:
        """The test as the checks before start, the shards and the GPU plan see it."""
        from pytest_llmperf.measuring.preflight import PlannedTest

        return PlannedTest(nodeid, self.servers, self.workloads, datasets)


MARKER_KEY = pytest.StashKey[ParsedMarker]()
# Per test: the marker's server= and base=, names looked up (`marker_servers`).
SERVERS_KEY = pytest.StashKey[dict[str, ServerSpec | None]]()


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
        resolved = {key: resolve_server(key, value, declared_for(item, value)) for key, value in given.items()}
    except ValueError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
    item.stash[SERVERS_KEY] = resolved
    return resolved


def declared_for(item: pytest.Item, value: object) -> dict[str, ServerSpec]:
    """The servers the conftest.py files above `item` declare, looked up (once per folder)
    only when `value` is a name to find among them."""
    cache = state_of(item.config).declared
    if isinstance(value, str) and item.path not in cache:
        cache[item.path] = declared_servers(item.ihook.pytest_llmperf_servers(config=item.config))
    return cache.get(item.path, {})


def check_asserted_names(item: pytest.Item) -> None:
    """The metric names a test asserts in literal strings, before any server starts."""
    from pytest_llmperf.collecting.asserted_names import check_function

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
    options = state_of(item.config).options
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
