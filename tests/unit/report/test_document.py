"""The report document: built from a session once, merged across xdist workers, plain throughout."""

import json
from types import SimpleNamespace

from pytest_llmperf import ServerSpec
from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.baselines.judgement import GateRecord
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.registry import Direction, Tolerance
from pytest_llmperf.report.document import build_report, merge_reports, plain, verdict_from_dict
from pytest_llmperf.workload.workload import resolve_workload
from tests.unit.judging.test_session import make_result
from tests.unit.report.documents import IMPROVED, REGRESSED, document, gate_entry, run_entry

SPEC = ServerSpec(name="m", model="org/m", env={"HF_TOKEN": "hf_secret"})


def fake_session():
    results = [make_result(100.0), make_result(90.0)]
    run = MeasuredRun(
        server=SPEC,
        workload=resolve_workload({"num_prompts": 4}, 8),
        results=results,
        samples={"decode_tok_s": [100.0, 90.0]},
        provenance={"target": "sim", "peak_gpu_memory_mib": 248222},
        published={"decode_tok_s": 97.96},
    )
    gate = GateRecord("t.py::test_a[8]", "m", 8, "baselines/sim/m.json", [REGRESSED], "fail", "table")
    options = SimpleNamespace(target="sim", profile="smoke", inconclusive="fail", confirm=1)
    return SimpleNamespace(
        options=options,
        pool=SimpleNamespace(starts=["m"], attached=[]),
        runs={"key": run},
        gates=[gate],
        workload_identity=lambda run: None,
        paired_info=lambda: None,  # not a paired session
        history_for_store=[],  # no --llmperf-store
        baselines_written=[],  # not recording
        capacities=[],  # no capacity test
    )


def test_build_report_is_plain_json_with_the_existing_keys_and_the_counts_the_summary_needs():
    doc = build_report(fake_session())
    assert json.loads(json.dumps(doc)) == doc  # plain: survives JSON (and xdist's channel) unchanged
    assert set(doc) == {
        "plugin_version",
        "target",
        "profile",
        "inconclusive",
        "confirm",
        "servers_started",
        "servers_attached",
        "runs",
        "verdicts",
    }
    (run,) = doc["runs"]
    assert set(run) >= {"server", "workload", "provenance", "summary", "samples", "notes", "published_reference"}
    assert run["server"]["name"] == "m" and run["server"]["env"] == {"HF_TOKEN": "***"}
    assert run["provenance"]["peak_gpu_memory_mib"] == 248222
    assert run["summary"] == {"decode_tok_s": 95.0}  # the median of the repetitions
    assert (run["completed"], run["attempted"], run["failed"], run["stop_reasons"]) == (8, 8, 0, ["completed"])
    assert len(run["results"]) == 2 and len(run["results"][0]["records"]) == 4
    (gate,) = doc["verdicts"]
    assert {k: gate[k] for k in ("test", "server", "concurrency", "baseline", "outcome", "message")} == {
        "test": "t.py::test_a[8]",
        "server": "m",
        "concurrency": 8,
        "baseline": "baselines/sim/m.json",
        "outcome": "fail",
        "message": "table",
    }
    (verdict,) = gate["verdicts"]
    assert verdict["status"] == "regressed" and verdict["tolerance"] == {"kind": "relative", "limit": 0.05}
    assert type(verdict["direction"]) is str and verdict["direction"] == "higher"  # not the enum


def test_verdicts_come_back_from_their_document_form():
    noisy = compare("ttft_ms_median", 40.0, 44.0, Tolerance("absolute", 1.0), "lower", error=1.5, note="n")
    missing = compare("mtp_speedup", None, 1.4, Tolerance("relative", 0.05), "higher")
    for verdict in (REGRESSED, IMPROVED, noisy, missing):
        assert verdict_from_dict(plain(verdict)) == verdict
    assert verdict_from_dict(plain(noisy)).direction is Direction.LOWER
    assert verdict_from_dict({**plain(REGRESSED), "added_later": 1}) == REGRESSED  # newer keys are ignored


def test_merge_concatenates_the_workers_runs_and_verdicts_in_worker_order_naming_each_worker():
    gw0 = document([run_entry("a", 1, 10.0)], [gate_entry("t::a", "a", 1, [REGRESSED])], ["a"])
    gw1 = document([run_entry("b", 1, 20.0), run_entry("b", 2, 30.0)], [gate_entry("t::b", "b", 1, [])], ["b"])
    gw10 = document([run_entry("c", 1, 5.0)], [], ["c"])
    merged = merge_reports({"gw10": gw10, "gw1": gw1, "gw0": gw0, "gw2": None})
    assert merged["workers"] == ["gw0", "gw1", "gw10"] and merged["lost_workers"] == ["gw2"]
    assert merged["servers_started"] == ["a", "b", "c"]
    assert [(r["server"]["name"], r["worker"]) for r in merged["runs"]] == [
        ("a", "gw0"),
        ("b", "gw1"),
        ("b", "gw1"),
        ("c", "gw10"),
    ]
    assert [(v["test"], v["worker"]) for v in merged["verdicts"]] == [("t::a", "gw0"), ("t::b", "gw1")]
    assert {k: merged[k] for k in ("plugin_version", "target", "profile", "inconclusive")} == {
        "plugin_version": "0.1.0",
        "target": "sim",
        "profile": "full",
        "inconclusive": "warn",
    }
    assert json.loads(json.dumps(merged)) == merged
    assert "worker" not in gw0["runs"][0]  # the workers' documents are left as they were


def test_merge_of_no_reports_is_none():
    assert merge_reports({}) is None
    assert merge_reports({"gw0": None}) is None


def test_capacity_lines_are_in_the_document_merged_by_worker_and_in_the_terminal_summary():
    from pytest_llmperf.report.terminal import terminal_lines

    line = {"test": "t.py::test_capacity", "server": "m", "line": "capacity 8 users (8-9): ...; 10 runs, 12 s"}
    perf = fake_session()
    perf.capacities = [{**line, "verdict": "capacity 8 -> 5 users, regressed: p90 TTFT 500 ms exceeded at 6"}]
    doc = build_report(perf)
    assert doc["capacities"][0]["line"] == line["line"]
    assert "capacities" not in build_report(fake_session())  # a session without one: the document as before
    merged = merge_reports({"gw0": doc, "gw1": {**doc, "capacities": [{**line, "verdict": None}]}})
    assert [c["worker"] for c in merged["capacities"]] == ["gw0", "gw1"]
    lines = terminal_lines(merged)
    assert "capacity m: capacity 8 users (8-9): ...; 10 runs, 12 s  [t.py::test_capacity]" in lines
    assert "  capacity 8 -> 5 users, regressed: p90 TTFT 500 ms exceeded at 6" in lines
    alone = terminal_lines({**doc, "runs": []})  # capacity tests alone: their lines, not "no workload ran"
    assert "no workload ran" not in alone and any(x.startswith("capacity m:") for x in alone)
