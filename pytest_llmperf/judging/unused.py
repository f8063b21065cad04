"""Baseline entries no collected test asks for: listed at the end of a session, removed
under --llmperf-prune, so an entry of a changed or removed test does not stay forever."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from pytest_llmperf.baselines.store import BaselineError, BaselineStore, sanitize_name, workload_key
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import Workload

# server file name -> the (concurrency, workload key) entries its tests ask for; None when
# a test of it runs a workload known only when it runs (then none of its entries is listed)
Asked = Mapping[str, Collection[tuple[int, str]] | None]
SHOWN = 10  # entries listed by name; the rest are counted


def asked_entries(
    planned: Iterable[tuple[Sequence[ServerSpec], Sequence[Workload]]],
) -> dict[str, set[tuple[int, str]] | None]:
    """What the collected tests (selected or not), each as (its servers, its workloads), ask for."""
    asked: dict[str, set[tuple[int, str]] | None] = {}
    for servers, workloads in planned:
        for spec in servers:
            name = sanitize_name(spec.name)
            if not workloads:
                asked[name] = None
            elif (entries := asked.setdefault(name, set())) is not None:
                entries.update((w.concurrency, workload_key(w.to_dict())) for w in workloads)
    return asked


def unused_entries(store: BaselineStore, folders: Iterable[str], asked: Asked) -> list[tuple[str, str, int, str]]:
    """(folder, server, concurrency, workload key) of each entry in the `folders` that no
    test asks for, among the servers a collected test uses; a file that cannot be read is
    left alone (its own test reports it)."""
    found = []
    for folder in sorted(set(folders)):
        for server in store.servers_in(folder):
            wanted = asked.get(server, None)
            if server not in asked or wanted is None:
                continue
            try:
                found += [(folder, server, c, key) for c, key in store.unused(folder, server, wanted)]
            except BaselineError:
                continue
    return found


def unused_lines(store: BaselineStore, folders: Iterable[str], asked: Asked, *, prune: bool, root: str) -> list[str]:
    """The summary's lines on unused entries; under `prune`, after removing them."""
    found = unused_entries(store, folders, asked)
    if not found:
        return []
    if prune:
        by_file: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for folder, server, concurrency, key in found:
            by_file.setdefault((folder, server), []).append((concurrency, key))
        removed = sum(store.prune(folder, server, drop) for (folder, server), drop in by_file.items())
        head = f"pruned {_entries(removed)} no collected test asks for:"
    else:
        head = f"{_entries(len(found))} no collected test asks for (--llmperf-prune removes them):"
    lines = [head]
    for folder, server, concurrency, key in found[:SHOWN]:
        lines.append(f"  {root}/{folder}/{server}.json: concurrency {concurrency}, {key}")
    if len(found) > SHOWN:
        lines.append(f"  ... and {len(found) - SHOWN} more")
    return lines


def _entries(n: int) -> str:
    return f"{n} baseline entr{'y' if n == 1 else 'ies'}"
