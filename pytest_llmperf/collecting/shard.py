"""--llmperf-shard K/N: which of the collected tests the K-th of N shards holds, and the
line that says so.

A model's servers (base, MTP, and any server a speedup test names with them) stay in one
shard: the groups are those a GPU plan puts on one slot (plan.groups_of), spread over the
shards as a plan spreads them over slots (plan.spread: most runs first onto the least
loaded). Tests of no server go to shard 1, so the N shards are disjoint and together the
whole suite. A plain function of the collected tests: every process that collected them
(xdist workers too) holds the same shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pytest_llmperf.collecting.plan import Group, PlannedTestLike, groups_of, spread

T = TypeVar("T", bound=PlannedTestLike)


@dataclass(frozen=True)
class Shard(Generic[T]):
    """The K-th of N shards of a collection: its groups, its tests and the others."""

    index: int  # K, counted from 1
    count: int  # N
    groups: tuple[Group, ...]  # this shard's, in the order its tests run
    kept: tuple[T, ...]  # its tests, in the collection's order
    deselected: tuple[T, ...]  # the other shards' tests
    suite_groups: int  # groups in the whole collection

    @property
    def empty(self) -> bool:
        """Nothing to run: more shards than the suite has groups."""
        return not self.kept

    def lines(self) -> list[str]:
        """What the shard holds, as the session prints it after collection."""
        name = f"shard {self.index}/{self.count}"
        others = f"{len(self.deselected)} test(s) in other shards deselected"
        if self.empty:
            return [
                f"{name}: empty, nothing runs: the suite has {self.suite_groups} group(s) (a model's servers "
                f"stay in one shard) for {self.count} shards; {others}"
            ]
        alone = sum(not test.servers for test in self.kept)
        tests = f"{len(self.kept)} test(s)" + (f" ({alone} of no server)" if alone else "")
        runs = sum(group.runs for group in self.groups)
        labels = ", ".join(group.label for group in self.groups)
        held = f"{len(self.groups)} group(s), {tests}, {runs} run(s)" + (f": {labels}" if labels else "")
        return [f"{name}: {held}; " + (others if self.deselected else "the whole suite")]


def shard_of(
    tests: Sequence[T],
    index: int,
    count: int,
    *,
    repetitions: int | str = 1,
    max_repetitions: int = 5,
    same_server: bool = False,
) -> Shard[T]:
    """The `index`-th (from 1) of `count` shards of `tests` (in the order they run). The
    repetition settings weigh the groups as a plan does (runs, then starts). ValueError for
    a shard that does not exist."""
    if not 1 <= index <= count:
        raise ValueError(f"shard {index}/{count} does not exist: K runs from 1 to N")
    groups = groups_of(tests, repetitions, max_repetitions, same_server)
    mine = spread(groups, count)[index - 1]
    held = {spec for group in mine for spec in group.servers}
    kept = tuple(test for test in tests if (test.servers[0] in held if test.servers else index == 1))
    chosen = {id(test) for test in kept}
    return Shard(
        index,
        count,
        tuple(mine),
        kept,
        tuple(test for test in tests if id(test) not in chosen),
        len(groups),
    )
