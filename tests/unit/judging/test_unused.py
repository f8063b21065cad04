"""Baseline entries no collected test asks for: found, listed, and pruned only when asked."""

from pytest_llmperf.baselines.store import BaselineStore, workload_key
from pytest_llmperf.judging.unused import asked_entries, unused_lines
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import resolve_workload

BASE = ServerSpec(name="base", model="org/m")
MTP = ServerSpec(name="mtp", model="org/m")
OTHER = ServerSpec(name="other", model="org/m")
AT_4, AT_8 = resolve_workload({"num_prompts": 4}, 4), resolve_workload({"num_prompts": 4}, 8)


def entry(store, server, workload):
    store.record("sim", server, workload.concurrency, {"decode_tok_s": [100.0]}, workload.to_dict(), {})


def test_a_speedup_test_asks_for_both_servers_and_a_test_known_only_when_it_runs_keeps_its_server():
    asked = asked_entries([((MTP, BASE), (AT_4,)), ((OTHER,), ()), ((OTHER,), (AT_8,))])
    key = workload_key(AT_4.to_dict())
    assert asked == {"mtp": {(4, key)}, "base": {(4, key)}, "other": None}


def test_unused_entries_of_the_servers_in_use_are_listed_then_pruned_only_under_prune(tmp_path):
    store = BaselineStore(tmp_path / "baselines")
    for server in ("base", "other"):
        entry(store, server, AT_4)
        entry(store, server, AT_8)
    entry(store, "gone", AT_4)  # no collected test uses it: left alone
    asked = asked_entries([((BASE,), (AT_4,)), ((OTHER,), ())])

    lines = unused_lines(store, ["sim"], asked, prune=False, root="baselines")
    assert lines == [
        "1 baseline entry no collected test asks for (--llmperf-prune removes them):",
        f"  baselines/sim/base.json: concurrency 8, {workload_key(AT_8.to_dict())}",
    ]
    assert sorted(store.load("sim", "base").entries) == [4, 8]

    assert unused_lines(store, ["sim"], asked, prune=True, root="baselines")[0] == (
        "pruned 1 baseline entry no collected test asks for:"
    )
    assert sorted(store.load("sim", "base").entries) == [4]
    assert sorted(store.load("sim", "other").entries) == [4, 8] and store.load("sim", "gone") is not None
    assert unused_lines(store, ["sim"], asked, prune=True, root="baselines") == []
