"""--llmperf-shard K/N: the shards of known inputs (a model's group whole in one shard,
the heaviest group first onto the least loaded shard, ties by test order, empty shards,
tests of no server in shard 1), the option's refusals, and the seed suite (tests/perf)
collected in-process: for N = 1..6 the shards are disjoint, together the whole suite,
and keep each model's base, MTP and speedup tests together; what the plugin deselects is
what the function says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.collecting.marker import parsed_marker
from pytest_llmperf.collecting.plan import groups_of
from pytest_llmperf.collecting.shard import shard_of
from pytest_llmperf.measuring.preflight import PlannedTest
from pytest_llmperf.options import OptionError, parse_shard, resolve_options
from pytest_llmperf.plugin import state_of
from tests.unit.collecting.test_plan import T, base, seed_like

ROOT = Path(__file__).resolve().parents[3]


def model_tests(name: str, concurrencies: tuple[int, ...]) -> list[T]:
    """One model as the seed suite tests it: base, MTP, then the speedup tests."""
    return seed_like(base(name), concurrencies=concurrencies)


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


def resolve(cli=None, ini=None):
    cli, ini = cli or {}, ini or {}
    return resolve_options(lambda dest: cli.get(dest), lambda name: ini.get(name, ""))


def test_the_shard_is_k_of_n_from_the_cli_or_the_ini():
    assert resolve().shard is None
    assert resolve(cli={"llmperf_shard": "2/8"}).shard == (2, 8)
    assert resolve(ini={"llmperf_shard": " 3 / 3 "}).shard == (3, 3)
    opts = resolve(cli={"llmperf_shard": "1/2"}, ini={"llmperf_shard": "2/2"})
    assert (opts.shard, opts.sources["llmperf_shard"]) == ((1, 2), "cli")
    assert parse_shard("1/1") == (1, 1)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("0/3", "--llmperf-shard: '0/3' names no shard: of 3 shards, K runs from 1 to 3 (1/3 to 3/3)"),
        ("4/3", "--llmperf-shard: '4/3' names no shard: of 3 shards, K runs from 1 to 3 (1/3 to 3/3)"),
        (
            "a/b",
            "--llmperf-shard: expected K/N, shard K of N counted from 1 (2/8 in the second of 8 CI jobs), got 'a/b'",
        ),
        ("3", "--llmperf-shard: expected K/N, shard K of N counted from 1"),
        ("-1/3", "--llmperf-shard: expected K/N"),
        ("1/0", "--llmperf-shard: expected K/N with at least one shard (1/1 runs the whole suite), got '1/0'"),
    ],
)
def test_bad_shards_name_the_option_and_the_form_to_write(raw, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        resolve(cli={"llmperf_shard": raw})


def test_a_bad_ini_shard_names_the_ini_option():
    with pytest.raises(OptionError, match=re.escape("ini option 'llmperf_shard': '2/1' names no shard")):
        resolve(ini={"llmperf_shard": "2/1"})


# The seed suite collected in-process. importlib: the outer session (CI collects the whole
# tree) may already hold a module named test_seed_suite.
SEED = [
    str(ROOT / "tests" / "perf"),
    f"--rootdir={ROOT}",
    "--collect-only",
    "-q",
    "--llmperf-sim",
    "--llmperf-profile=smoke",
    "--import-mode=importlib",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
]


class Collected:
    """What an in-process session collected, deselected, printed and planned."""

    def __init__(self) -> None:
        self.tests: list[PlannedTest] = []
        self.deselected: list[str] = []
        self.lines: list[str] = []
        self.plan: Any = None

    def pytest_deselected(self, items) -> None:
        self.deselected += [item.nodeid for item in items]

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:
            parsed = parsed_marker(item)
            kwargs = parsed.kwargs if parsed is not None else {}
            servers = tuple(s for s in (kwargs.get("server"), kwargs.get("base")) if s is not None)
            self.tests.append(PlannedTest(item.nodeid, servers, parsed.workloads if parsed is not None else ()))
        self.lines = list(state_of(session.config).selection_lines)
        self.plan = state_of(session.config).plan


def collect(*args: str) -> tuple[int, Collected]:
    collected = Collected()
    code = pytest.main([*SEED, *args], plugins=[collected])
    return int(code), collected


@pytest.fixture(scope="module")
def seed_suite() -> list[PlannedTest]:
    code, collected = collect()
    assert code == 0 and len(collected.tests) == 22, collected.tests  # 18 fixed-concurrency, 4 capacity tests
    return collected.tests


@pytest.mark.parametrize("count", range(1, 7))
def test_the_seed_suites_shards_hold_it_whole_once_with_each_model_together(seed_suite, count):
    shards = [shard_of(seed_suite, k, count) for k in range(1, count + 1)]
    held = [test.nodeid for s in shards for test in s.kept]
    assert sorted(held) == sorted(test.nodeid for test in seed_suite) and len(held) == len(set(held))
    shard_by_model: dict[str, set[int]] = {}
    for s in shards:
        for test in s.kept:
            for spec in test.servers:  # base, MTP, and both servers of a speedup test
                shard_by_model.setdefault(spec.model, set()).add(s.index)
    assert len(shard_by_model) == 2 and all(len(where) == 1 for where in shard_by_model.values())
    assert [len(s.kept) for s in shards] == ([22] if count == 1 else [11, 11, 0, 0, 0, 0][:count])  # two models


def test_the_plugin_deselects_what_the_function_says_and_plans_the_shard_alone(seed_suite):
    code, run = collect("--llmperf-shard", "2/3", "--llmperf-gpus", "0,1")
    expected = shard_of(seed_suite, 2, 3, repetitions=1)  # smoke: one repetition
    assert code == 0
    assert [t.nodeid for t in run.tests] == [t.nodeid for t in expected.kept]
    assert run.deselected == [t.nodeid for t in expected.deselected]
    assert [f"[llmperf] {line}" for line in expected.lines()] == [line for line in run.lines if " shard " in line]
    assert re.fullmatch(r"\[llmperf\] shard 2/3: 1 group\(s\), 11 test\(s\), 8 run\(s\): Qwen/\S+; "
                        r"11 test\(s\) in other shards deselected", run.lines[-1])  # fmt: skip
    # --llmperf-gpus plans this shard's servers alone
    assert set(run.plan.gpus_by_server()) == {spec.name for t in expected.kept for spec in t.servers}


def test_an_empty_shard_runs_nothing_says_so_and_passes(seed_suite):
    code, run = collect("--llmperf-shard", "5/6")
    assert code == 0  # not pytest's "no tests collected": a CI matrix of six jobs passes
    assert run.tests == [] and len(run.deselected) == 22
    assert run.lines[-1].startswith("[llmperf] shard 5/6: empty, nothing runs: the suite has 2 group(s)")


def test_a_bad_shard_stops_pytest_before_collection(capsys):
    code, run = collect("--llmperf-shard", "4/3")
    assert code == pytest.ExitCode.USAGE_ERROR and run.tests == []
    assert "--llmperf-shard: '4/3' names no shard: of 3 shards, K runs from 1 to 3" in capsys.readouterr().err
