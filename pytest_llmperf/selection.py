"""Servers by name: which ServerSpec a marker's `server="NAME"` means.

Plain functions; plugin.py connects them to pytest (the `pytest_llmperf_servers` hook
and the marker).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmperf.servers.spec import ServerSpec

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
