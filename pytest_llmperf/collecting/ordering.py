"""Test order for performance tests, so each server starts once: other tests first, then
by model, the base server's tests, the speculative server's, then the speedup tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


SortKey = tuple[int] | tuple[int, int, int, str]  # unmarked tests first, then (group, phase, name)


def perf_sort_key_factory() -> Callable[[Mapping[str, Any] | None], SortKey]:
    groups: dict[str, int] = {}

    def key(marker: Mapping[str, Any] | None) -> SortKey:
        if marker is None or marker.get("server") is None:
            return (0,)
        server = marker["server"]
        group = groups.setdefault(server.model, len(groups))
        if marker.get("base") is not None:
            phase = 2
        elif server.is_speculative:
            phase = 1
        else:
            phase = 0
        # Keep each server's tests together within the phase (several MTP variants).
        return (1, group, phase, server.name)

    return key


def order_items(items: Sequence[T], marker_of: Callable[[T], Mapping[str, Any] | None]) -> list[T]:
    """A stable reordering of `items`; `marker_of(item)` gives its llmperf marker kwargs."""
    key = perf_sort_key_factory()
    keys = [key(marker_of(item)) for item in items]  # in collection order: groups by first appearance
    order = sorted(range(len(items)), key=lambda i: (keys[i], i))
    return [items[i] for i in order]
