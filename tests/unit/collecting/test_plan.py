"""The GPU plan on known inputs: slots by the largest server's need, a model's servers on
one slot, the heaviest group first onto the least loaded slot, the starts a slot makes,
and the refusal that says what each server needs and what is there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_llmperf.collecting.plan import PlanError, gpu_need, make_plan
from pytest_llmperf.servers.spec import ServerSpec

MTP = {"method": "mtp", "num_speculative_tokens": 3}


@dataclass(frozen=True)
class T:
    nodeid: str
    servers: tuple[ServerSpec, ...]
    workloads: tuple[Any, ...] = ()


def base(name: str, *args: str, gpus: int | None = None) -> ServerSpec:
    return ServerSpec(name=name, model=f"org/{name}", args=args, gpus=gpus)


def mtp(spec: ServerSpec) -> ServerSpec:
    return spec.with_speculative(MTP, name=f"{spec.name}-mtp")


def seed_like(*bases: ServerSpec, concurrencies: tuple[int, ...] = (1, 8, 32)) -> list[T]:
    """The seed suite's shape, in the ordering module's order: per model its base tests,
    its MTP tests, then the speedup tests (which reuse both servers' runs)."""
    tests = []
    for b in bases:
        m = mtp(b)
        tests += [T(f"base-{b.name}-{c}", (b,), (c,)) for c in concurrencies]
        tests += [T(f"mtp-{b.name}-{c}", (m,), (c,)) for c in concurrencies]
        tests += [T(f"speedup-{b.name}-{c}", (m, b), (c,)) for c in concurrencies]
    return tests


@pytest.mark.parametrize(
    ("args", "gpus", "need"),
    [
        ((), None, 1),
        (("--tensor-parallel-size", "2"), None, 2),
        (("-tp=4",), None, 4),
        (("-tp", "2", "--pipeline-parallel-size", "2"), None, 4),
        (("--data-parallel-size", "2", "-tp", "2"), None, 4),
        (("--max-num-seqs", "32"), 3, 3),  # gpus= wins where the args do not say
        (("-tp", "2"), 8, 8),
    ],
)
def test_a_servers_need_is_its_gpus_else_tp_x_pp_x_dp_from_its_args(args, gpus, need):
    assert gpu_need(base("s", *args, gpus=gpus)) == need


@pytest.mark.parametrize("args", [("-tp", "two"), ("--tensor-parallel-size",), ("-tp=0",)])
def test_a_parallel_size_that_is_not_a_whole_number_is_refused_naming_the_server(args):
    with pytest.raises(PlanError, match=r"server s: .* needs a whole number >= 1.*gpus=N"):
        gpu_need(base("s", *args))


@pytest.mark.parametrize("gpus", [0, -1, True, 1.5])
def test_a_spec_refuses_gpus_that_are_not_a_count(gpus):
    with pytest.raises(ValueError, match="gpus= is the number of GPUs"):
        base("s", gpus=gpus)


def test_four_models_on_four_gpus_each_get_a_slot_with_base_and_mtp_on_it():
    models = [base(n) for n in ("a", "b", "c", "d")]
    plan = make_plan(seed_like(*models), ["0", "1", "2", "3"], workers=4)
    assert plan.width == 1
    assert [slot.gpus for slot in plan.slots] == [("0",), ("1",), ("2",), ("3",)]
    by_server = plan.gpus_by_server()
    assert by_server == {
        "a": ("0",), "a-mtp": ("0",), "b": ("1",), "b-mtp": ("1",),
        "c": ("2",), "c-mtp": ("2",), "d": ("3",), "d-mtp": ("3",),
    }  # fmt: skip
    for slot in plan.slots:
        (group,) = slot.groups
        assert [s.name for s in group.servers] == [group.servers[0].name, group.servers[0].name + "-mtp"]
        assert (group.tests, group.runs, group.starts) == (9, 6, (2, 2))  # base once, MTP once
    assert plan.slots[0].group_name == "llmperf-gpus-0"
    assert plan.unused_gpus == ()


def test_the_seed_suite_on_four_gpus_uses_two_slots_and_says_why_two_idle():
    plan = make_plan(seed_like(base("35b"), base("27b")), ["0", "1", "2", "3"], workers=4)
    assert [[s.name for g in slot.groups for s in g.servers] for slot in plan.slots] == [
        ["35b", "35b-mtp"],
        ["27b", "27b-mtp"],
        [],
        [],
    ]
    lines = plan.lines()
    assert lines[0] == (
        "plan: GPUs 0,1,2,3 in 4 slot(s) of 1 GPU(s), 4 worker(s); 2 group(s) on 2 slot(s), 4 server start(s) in all"
    )
    assert "  slot 0 (GPUs 0): 2 start(s), in this order:" in lines
    assert "    1. 35b (1 GPU(s))" in lines and "    2. 35b-mtp (1 GPU(s))" in lines
    assert "       (org/35b: 9 test(s), 6 run(s), one slot)" in lines
    assert not any(line.startswith("  slot 2") for line in lines)
    assert lines[-1] == (
        "  2 slot(s) idle (GPUs 2; GPUs 3): the suite has 2 group(s), and a model's servers share one slot"
    )


def test_slots_are_as_wide_as_the_largest_server_and_the_rest_of_the_gpus_are_said_unused():
    big, small = base("big", "-tp", "2"), base("small")
    plan = make_plan(seed_like(big, small, concurrencies=(8,)), [str(i) for i in range(5)], workers=4)
    assert plan.width == 2
    assert [slot.gpus for slot in plan.slots] == [("0", "1"), ("2", "3")]
    assert plan.slot_of("big").gpus == ("0", "1") and plan.slot_of("small-mtp").gpus == ("2", "3")
    assert plan.unused_gpus == ("4",)
    assert plan.lines()[-1] == "  GPUs 4 unused: slots are 2 GPU(s) wide (the largest server's need)"


def test_more_groups_than_slots_queue_on_the_least_loaded_slot_heaviest_first():
    heavy = seed_like(base("heavy"), concurrencies=(1, 8, 32))  # 6 runs
    light = [seed_like(base(n), concurrencies=(8,)) for n in ("l1", "l2", "l3")]  # 2 runs each
    tests = [*light[0], *heavy, *light[1], *light[2]]
    plan = make_plan(tests, ["0", "1"], workers=2)
    # heavy (6) onto slot 0; l1, l2, l3 (2 each) onto slot 1 in turn: 6 against 6 runs.
    assert [[g.servers[0].name for g in slot.groups] for slot in plan.slots] == [["heavy"], ["l1", "l2", "l3"]]
    assert plan.slots[1].starts == (6, 6)
    assert "    5. l3 (1 GPU(s))" in plan.lines()  # a slot's servers numbered in the order they run


def test_one_worker_gets_one_slot_and_the_plan_says_how_to_use_the_others():
    plan = make_plan(seed_like(base("a"), base("b")), ["0", "1", "2", "3"], workers=1)
    assert [slot.gpus for slot in plan.slots] == [("0",)]
    assert [g.servers[0].name for g in plan.slots[0].groups] == ["a", "b"]
    assert plan.lines()[-1] == "  GPUs 1,2,3 unused: 1 worker(s) own 1 slot(s) of 4: run with -n 4 to use them"


def test_a_speedup_test_across_two_models_keeps_both_on_one_slot():
    a, b = base("a"), base("b")
    tests = [T("ta", (a,), (8,)), T("tb", (b,), (8,)), T("cross", (a, b), (8,))]
    plan = make_plan(tests, ["0", "1"], workers=2)
    assert plan.slot_of("a") is plan.slot_of("b")
    assert plan.slots[1].groups == ()


def test_repetitions_add_a_fresh_start_per_run_after_the_first_and_auto_gives_a_range():
    tests = seed_like(base("a"), concurrencies=(1, 8))  # 4 runs, 2 switches
    assert make_plan(tests, ["0"], 1, repetitions=3).slots[0].starts == (2 + 4 * 2, 2 + 4 * 2)
    assert make_plan(tests, ["0"], 1, repetitions="auto", max_repetitions=5).slots[0].starts == (2, 2 + 4 * 4)
    assert make_plan(tests, ["0"], 1, repetitions=3, same_server=True).slots[0].starts == (2, 2)
    assert "2 to 18 server start(s) in all" in make_plan(tests, ["0"], 1, repetitions="auto").lines()[0]


def test_a_base_run_the_speedup_test_did_not_find_cached_starts_the_base_again():
    b = base("a")
    m = mtp(b)
    tests = [T("mtp", (m,), (8,)), T("speedup", (m, b), (8,))]  # no base test: the speedup runs the base
    (group,) = make_plan(tests, ["0"], 1).slots[0].groups
    assert (group.runs, group.starts) == (2, (2, 2))


def test_gpus_that_cannot_hold_the_largest_server_are_refused_listing_each_need():
    tests = seed_like(base("big", "--tensor-parallel-size", "4"), base("small"), concurrencies=(8,))
    with pytest.raises(PlanError) as info:
        make_plan(tests, ["0", "1"], workers=2)
    assert str(info.value) == (
        "the GPUs cannot hold the largest server: it needs 4 GPU(s), --llmperf-gpus gives 2 (0,1). "
        "GPUs each server needs: big 4; big-mtp 4; small 1; small-mtp 1. Give more GPUs, or lower the "
        "server's --tensor-parallel-size (or gpus=)"
    )


def test_a_plan_without_performance_tests_has_empty_slots():
    plan = make_plan([], ["0", "1"], workers=2)
    assert [slot.groups for slot in plan.slots] == [(), ()]
