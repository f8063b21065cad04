"""Servers by name: which ServerSpec a marker's `server="NAME"` means, and which tests
`--llmperf-servers` keeps (plain functions; plugin.py connects them to pytest)."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Generic, TypeVar

from pytest_llmperf.servers.spec import ServerSpec

T = TypeVar("T")

HOW_TO_DECLARE = "declare servers in a conftest.py: def pytest_llmperf_servers(): return [ServerSpec(name=...), ...]"


def declared_servers(results: Iterable[Any]) -> dict[str, ServerSpec]:
    """One name -> spec table from the hook's results (one iterable of specs per conftest.py or
    plugin). ValueError when a result holds something else, or one name means two specs."""
    table: dict[str, ServerSpec] = {}
    for result in results:
        if result is None:
            continue
        if isinstance(result, (str, bytes, ServerSpec, Mapping)) or not isinstance(result, Iterable):
            raise ValueError(f"pytest_llmperf_servers() must return a list of ServerSpec objects, got {result!r}")
        for spec in result:
            if not isinstance(spec, ServerSpec):
                raise ValueError(f"pytest_llmperf_servers() must return ServerSpec objects, got {spec!r}")
            known = table.setdefault(spec.name, spec)
            if known != spec:
                raise ValueError(
                    f"two different servers are declared as {spec.name!r}: {known!r} and {spec!r}; "
                    "a name is one server (its baselines are filed under it)"
                )
    return table


def declared_names(results: Iterable[Any]) -> set[str]:
    """Every name in the hook's results, from any folder (a bad result is reported where a
    test names one of its servers)."""
    return {
        spec.name
        for result in results
        if isinstance(result, Iterable) and not isinstance(result, (str, bytes, Mapping))
        for spec in result
        if isinstance(spec, ServerSpec)
    }


def resolve_server(key: str, value: object, declared: Mapping[str, ServerSpec]) -> ServerSpec | None:
    """The marker's `key=` (server or base): a declared server's name, a ServerSpec, or None."""
    if value is None or isinstance(value, ServerSpec):
        return value
    if not isinstance(value, str):
        raise ValueError(f"llmperf {key}= must be a declared server's name or a ServerSpec, got {value!r}")
    spec = declared.get(value)
    if spec is not None:
        return spec
    if not declared:
        raise ValueError(f"llmperf {key}={value!r}: no server is declared here; {HOW_TO_DECLARE}")
    close = difflib.get_close_matches(value, list(declared), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"llmperf {key}={value!r} is not a declared server; {hint}declared: {', '.join(sorted(declared))}")


def matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether a server name matches one of the glob patterns (case-sensitive, as names are)."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@dataclass
class Selection(Generic[T]):
    """What `--llmperf-servers` keeps and deselects, and the lines that say so."""

    kept: list[T]
    deselected: list[T]
    lines: list[str]


def select_servers(
    items: Sequence[T],
    servers_of: Callable[[T], Mapping[str, ServerSpec | None]],
    patterns: Sequence[str],
    declared: Iterable[str],
    where: str = "--llmperf-servers",
) -> Selection[T]:
    """Keep a test when its server and its base (if any) both match, or it names none.
    ValueError for a pattern matching no server (a typo would deselect everything and pass)."""
    marked = [(item, servers_of(item)) for item in items]
    used = {spec.name for _, servers in marked for spec in servers.values() if spec is not None}
    names = set(declared) | used
    unmatched = [pattern for pattern in patterns if not matches_any(pattern, names)]
    if unmatched:
        known = ", ".join(sorted(names)) or f"none ({HOW_TO_DECLARE})"
        raise ValueError(f"{where}: {', '.join(map(repr, unmatched))} matches no server; the servers: {known}")
    kept: list[T] = []
    deselected: list[T] = []
    selected: set[str] = set()  # servers of kept tests
    others: set[str] = set()  # servers of tests deselected for their own server
    bases: set[str] = set()  # bases of speedup tests deselected for their base alone
    perf_kept = speedups = 0
    for item, servers in marked:
        names_here = [spec.name for spec in servers.values() if spec is not None]
        if all(matches(name, patterns) for name in names_here):
            kept.append(item)
            perf_kept += bool(names_here)
            selected.update(names_here)
            continue
        deselected.append(item)
        server, base = servers.get("server"), servers.get("base")
        if server is not None and matches(server.name, patterns) and base is not None:
            speedups += 1
            bases.add(base.name)
        else:
            others.update(name for name in names_here if not matches(name, patterns))
    parts = [f"{_tests(perf_kept)} of {', '.join(sorted(selected)) or 'no server'} selected"]
    if len(deselected) > speedups:
        parts.append(f"{_tests(len(deselected) - speedups)} of {', '.join(sorted(others))} deselected")
    if speedups:
        parts.append(
            f"{_tests(speedups, 'speedup ')} deselected, their base {', '.join(sorted(bases))} not selected "
            "(a speedup test needs both its servers)"
        )
    return Selection(kept, deselected, [f"{where} {shlex.quote(','.join(patterns))}: " + "; ".join(parts)])


def _tests(count: int, kind: str = "") -> str:
    return f"{count} {kind}test{'' if count == 1 else 's'}"


def matches_any(pattern: str, names: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for name in names)
