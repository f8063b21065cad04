"""--llmperf-shard K/N: the shards of known inputs (a model's group whole in one shard,
the heaviest group first onto the least loaded shard, ties by test order, empty shards,
tests of no server in shard 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_llmperf.plan import groups_of
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.shard import shard_of

MTP = {"method": "mtp", "num_speculative_tokens": 3}


@dataclass(frozen=True)
class T:
    nodeid: str
    servers: tuple[ServerSpec, ...]
    workloads: tuple[Any, ...] = ()


def base(name: str) -> ServerSpec:
    return ServerSpec(name=name, model=f"org/{name}")


def model_tests(name: str, concurrencies: tuple[int, ...]) -> list[T]:
    """One model as the seed suite tests it: base, MTP, then the speedup tests."""
    b = base(name)
    m = b.with_speculative(MTP, name=f"{name}-mtp")
    return (
        [T(f"base-{name}-{c}", (b,), (c,)) for c in concurrencies]
        + [T(f"mtp-{name}-{c}", (m,), (c,)) for c in concurrencies]
        + [T(f"speedup-{name}-{c}", (m, b), (c,)) for c in concurrencies]
    )


def ids(tests) -> list[str]:
    return [test.nodeid for test in tests]


def models(shard) -> list[str]:
    return [group.label for group in shard.groups]


def test_the_heaviest_group_goes_first_onto_the_least_loaded_shard():
    # runs per model: a 8, b 6, c 6, d 4 -> a | b; c onto b's shard (6 < 8); d onto a's: 12 and 12
    tests = model_tests("d", (1, 2)) + model_tests("b", (1, 2, 3)) + model_tests("a", (1, 2, 3, 4))
    tests += model_tests("c", (1, 2, 3))
    one, two = (shard_of(tests, k, 2) for k in (1, 2))
    assert (models(one), models(two)) == (["org/d", "org/a"], ["org/b", "org/c"])  # each in the tests' order
    assert [sum(g.runs for g in s.groups) for s in (one, two)] == [12, 12]
    assert ids(one.kept) == [t.nodeid for t in tests if t.nodeid.split("-")[1] in ("d", "a")]
    assert set(ids(one.kept)) == set(ids(two.deselected))


def test_a_models_servers_and_the_tests_that_pair_them_stay_in_one_shard():
    tests = model_tests("a", (1, 8)) + model_tests("b", (1, 8)) + model_tests("c", (1, 8))
    # a test comparing b's MTP with c's base joins the two models into one group
    tests.append(T("cross-b-c", (tests[len(tests) // 3 + 2].servers[0], base("c")), (1,)))
    assert len(groups_of(tests, 1, 5, False)) == 2
    for count in (2, 3):
        shards = [shard_of(tests, k, count) for k in range(1, count + 1)]
        holder = {nodeid: s.index for s in shards for nodeid in ids(s.kept)}
        for name in ("a", "b", "c"):
            assert len({shard for nodeid, shard in holder.items() if f"-{name}-" in nodeid}) == 1
        assert holder["cross-b-c"] == holder["base-c-1"] == holder["mtp-b-8"]


def test_equal_groups_go_by_test_order_and_every_call_agrees():
    tests = model_tests("z", (1,)) + model_tests("y", (1,)) + model_tests("x", (1,))
    assert [models(shard_of(tests, k, 3)) for k in (1, 2, 3)] == [["org/z"], ["org/y"], ["org/x"]]
    again = [T(t.nodeid, t.servers, t.workloads) for t in tests]  # another process's equal tests
    for k in (1, 2):
        assert ids(shard_of(again, k, 2).kept) == ids(shard_of(tests, k, 2).kept)


def test_more_shards_than_groups_leaves_the_last_ones_empty_and_says_so():
    tests = model_tests("a", (1, 8)) + model_tests("b", (1,))
    shards = [shard_of(tests, k, 4) for k in (1, 2, 3, 4)]
    assert [s.empty for s in shards] == [False, False, True, True]
    assert shards[3].lines() == [
        "shard 4/4: empty, nothing runs: the suite has 2 group(s) (a model's servers stay in one shard) for 4 "
        "shards; 9 test(s) in other shards deselected"
    ]
    assert shards[0].lines() == [
        "shard 1/4: 1 group(s), 6 test(s), 4 run(s): org/a; 3 test(s) in other shards deselected"
    ]


def test_tests_of_no_server_go_to_shard_one_alone():
    plain = [T("test_helper", ()), T("test_other_helper", ())]
    tests = [plain[0], *model_tests("a", (1,)), *model_tests("b", (1,)), plain[1]]
    shards = [shard_of(tests, k, 3) for k in (1, 2, 3)]
    assert ids(shards[0].kept) == ["test_helper", "base-a-1", "mtp-a-1", "speedup-a-1", "test_other_helper"]
    assert shards[0].lines()[0].startswith("shard 1/3: 1 group(s), 5 test(s) (2 of no server), 2 run(s): org/a; ")
    assert shards[2].empty and shards[2].deselected == tuple(tests)
    only_plain = shard_of(plain, 1, 1)
    assert ids(only_plain.kept) == ids(plain)
    assert only_plain.lines() == ["shard 1/1: 0 group(s), 2 test(s) (2 of no server), 0 run(s); the whole suite"]


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_the_shards_are_disjoint_and_together_the_whole_suite(count):
    tests = [T("plain", ())] + [t for n, c in zip("abcdefg", range(1, 8)) for t in model_tests(n, tuple(range(c)))]
    shards = [shard_of(tests, k, count) for k in range(1, count + 1)]
    held = [nodeid for s in shards for nodeid in ids(s.kept)]
    assert sorted(held) == sorted(ids(tests)) and len(held) == len(set(held))
    for s in shards:
        assert sorted(ids(s.kept) + ids(s.deselected)) == sorted(ids(tests))


@pytest.mark.parametrize(("index", "count"), [(0, 3), (4, 3), (1, 0)])
def test_a_shard_that_does_not_exist_is_refused(index, count):
    with pytest.raises(ValueError, match="does not exist"):
        shard_of(model_tests("a", (1,)), index, count)
