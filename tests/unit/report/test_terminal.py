"""The terminal summary, rendered from plain report documents (one process or merged workers)."""

import dataclasses

from pytest_llmperf.baselines.compare import compare, unconfirmed
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.document import merge_reports
from pytest_llmperf.report.terminal import terminal_lines
from tests.unit.report.documents import IMPROVED, REGRESSED, document, gate_entry, run_entry

MTP_CONFIG = {"method": "mtp", "num_speculative_tokens": 3}


def test_no_runs_says_so_after_the_servers_started():
    assert terminal_lines(document([], [], [])) == ["no workload ran"]
    assert terminal_lines(document([], [], ["m"])) == ["servers started (one at a time): m", "no workload ran"]


def test_an_endpoint_someone_else_runs_is_used_not_started():
    doc = document([], [], [], servers_attached=["m"])
    assert terminal_lines(doc) == ["servers used (run by someone else, none started here): m", "no workload ran"]


def test_measured_table_counts_notes_and_published_reference():
    runs = [
        run_entry("m", 8, 407.9, published_reference={"decode_tok_s": 407.9}),
        run_entry("m-mtp", 8, 600.0, speculative_config=MTP_CONFIG, notes=["spec-decode counters did not move"]),
        run_entry("m", 32, 300.0, completed=118, attempted=500, failed=2, stop_reasons=["max_seconds"]),
        run_entry("m", 1, 50.0, notes=["2 successful request(s) reported no usage"]),  # every note is shown
    ]
    lines = terminal_lines(document(runs, [], ["m", "m-mtp"]))
    assert lines[0] == "servers started (one at a time): m, m-mtp"
    text = "\n".join(lines)
    assert lines[2].startswith("server ") and "decode tok/s" in lines[2] and "accept len" in lines[2]
    assert lines[4].split() == ["m", "8", "4/4", "407.9", "-", "-", "40.0", "-", "-", "-"]
    assert "  published (ref only)" in text
    assert "118/500 (time cap), 2 failed" in text
    assert "note: m-mtp @ 8: spec-decode counters did not move" in lines
    assert "note: m @ 1: 2 successful request(s) reported no usage" in lines


def test_under_v_warmups_are_a_table_beside_the_measured_decode_so_the_cold_start_shows():
    cold = {"requests": 64, "completed": 64, "failed": 0, "duration_s": 20.0, "output_tok_s": 250.0}
    wave = {"requests": 8, "completed": 7, "failed": 1, "duration_s": 4.5, "output_tok_s": 380.0}
    runs = [
        run_entry("m", 8, 407.9, server_warmup=cold, warmup=wave),
        run_entry("m", 32, 500.0, server_warmup=None, warmup=None),  # none: no line
    ]
    assert not any(line.startswith("warm-up") for line in terminal_lines(document(runs, [], ["m"])))  # the log has them
    lines = terminal_lines(document(runs, [], ["m"]), warmups=True)
    start = lines.index(next(line for line in lines if line.startswith("warm-up (not measured)")))
    assert lines[start].split() == [
        "warm-up", "(not", "measured)", "conc", "requests", "seconds", "output", "tok/s", "measured", "decode", "tok/s"
    ]  # fmt: skip
    assert [line.split() for line in lines[start + 2 : start + 4]] == [
        ["m", "server", "64", "20.0", "250.0"],
        ["m", "8", "8,", "1", "failed", "4.5", "380.0", "407.9"],
    ]
    assert len(lines) == start + 4
    assert not any(line.startswith("warm-up") for line in terminal_lines(document(runs[1:], [], ["m"])))


def test_verdicts_become_one_table_by_server_with_hints_and_recorded_and_refused_lines():
    noisy = compare("ttft_ms_median", 40.0, 41.0, Tolerance("relative", 0.05), "lower", error=5.0)
    assert noisy.status == "inconclusive"
    runs = [run_entry("m", 8, 80.0, published_reference={"decode_tok_s": 97.96}), run_entry("n", 4, 130.0)]
    gates = [
        gate_entry("t::a", "m", 8, [REGRESSED, noisy], outcome="fail"),
        gate_entry("t::b", "n", 4, [IMPROVED]),
        gate_entry("t::c", "n", 2, [], outcome="recorded", message="recorded decode_tok_s in baselines/sim/n.json"),
        gate_entry("t::d", "o", 1, [], outcome="refused"),
    ]
    lines = terminal_lines(document(runs, gates, ["m", "n"], inconclusive="fail"))
    text = "\n".join(lines)
    assert "REFUSED o @ 1: baseline recorded under another workload or hardware (baselines/sim/o.json)" in lines
    table = text.splitlines()[text.splitlines().index("llmperf verdicts:") :]
    n_row = next(i for i, line in enumerate(table) if line.startswith("n "))
    m_table = "\n".join(table[:n_row])
    assert table[n_row + 1] == "(1 regressed, 1 inconclusive, 1 improved)"
    assert "!! REGRESSED" in m_table and "? inconclusive" in m_table and "97.96" not in m_table
    assert "98.0" in m_table  # the published figure beside the decode row (ref only)
    assert lines.index("improvements beyond tolerance:") < lines.index(
        "inconclusive: the noise is too wide to tell (--llmperf-inconclusive fail):"
    )
    assert f"n @ 4: {IMPROVED.hint}" in lines and f"m @ 8: {noisy.hint}" in lines
    assert lines[-2:] == [
        "baselines recorded (review and commit them):",
        "n @ 2: recorded decode_tok_s in baselines/sim/n.json",
    ]


def test_a_merged_document_names_the_workers_and_any_lost_one():
    gw0 = document([run_entry("a", 1, 10.0)], [gate_entry("t::a", "a", 1, [REGRESSED], outcome="fail")], ["a"])
    gw1 = document([run_entry("b", 1, 20.0)], [], ["b"])
    lines = terminal_lines(merge_reports({"gw0": gw0, "gw1": gw1, "gw2": None}))
    assert lines[0] == "servers started (one at a time on each of 2 xdist workers): a, b"
    assert lines[1].startswith("xdist worker gw2 went down without reporting")
    assert sum(line.startswith(("a ", "b ")) for line in lines) == 2  # both workers' runs in one table
    assert "llmperf verdicts:\n" in "\n".join(lines) and "\n(1 regressed)" in "\n".join(lines)


def test_a_reasoning_run_adds_ttfa_and_reasoning_share_columns_and_only_then():
    plain = run_entry("m", 8, 407.9)
    reasoning = run_entry("m-think", 8, 300.0)
    reasoning["summary"].update({"ttfa_ms_median": 5123.4, "reasoning_share": 0.912})
    without = terminal_lines(document([plain], [], ["m"]))
    assert "TTFA p50 ms" not in without[2] and "reasoning share" not in without[2]
    lines = terminal_lines(document([plain, reasoning], [], ["m", "m-think"]))
    assert lines[2].index("accept len") < lines[2].index("TTFA p50 ms") < lines[2].index("reasoning share")
    assert lines[4].split()[-2:] == ["-", "-"]  # the plain run has none
    assert lines[5].split()[-2:] == ["5123.4", "0.912"]


def test_goodput_columns_and_their_slos_show_when_a_run_had_slos():
    plain = "\n".join(terminal_lines(document([run_entry("m", 8, 400.0)], [], ["m"])))
    assert "goodput" not in plain and "SLO" not in plain
    runs = [
        run_entry(
            "m",
            8,
            400.0,
            workload={"concurrency": 8, "num_prompts": 4, "slos": "ttft:500 tpot:50"},
            summary={"decode_tok_s": 400.0, "request_goodput": 1.25, "slo_attainment": 0.625},
        ),
        run_entry("m", 32, 300.0),  # no SLOs: its cells are "-"
    ]
    lines = terminal_lines(document(runs, [], ["m"]))
    header = next(line for line in lines if line.startswith("server "))
    assert header.split()[-4:] == ["goodput", "req/s", "SLO", "met"]
    rows = [line.split() for line in lines if line.startswith("m ")]
    assert rows[0][-2:] == ["1.250", "0.625"] and rows[1][-2:] == ["-", "-"]
    assert "goodput SLOs (ms) ttft:500 tpot:50: m @ 8" in lines


def test_the_markdown_and_html_measured_tables_carry_the_goodput_columns_too():
    from pytest_llmperf.report.sections import measured_table

    run = run_entry(
        "m",
        8,
        400.0,
        workload={"concurrency": 8, "num_prompts": 4, "slos": "e2el:3000"},
        summary={"decode_tok_s": 400.0, "request_goodput": 2.0, "slo_attainment": 1.0},
    )
    header, rows = measured_table(document([run], [], ["m"]))
    assert header[-2:] == ["goodput req/s", "SLO met"] and rows[0][-2:] == ["2.000", "1.000"]
    assert measured_table(document([run_entry("m", 8, 1.0)], [], ["m"]))[0][-1] == "accept len"


def test_the_output_canary_and_checks_not_run_are_listed_under_the_tables():
    canary = "outputs changed for 2 of 97 prompts at temperature 0 (prompt index 4, 17; canary, not gated): ..."
    old = "the baseline has no output lines (recorded by an older version): ..."
    gates = [
        gate_entry("t::a", "m", 8, [IMPROVED], checks=[canary]),
        gate_entry("t::b", "n", 4, [IMPROVED], checks=[old]),
        gate_entry("t::c", "o", 2, [IMPROVED]),  # a document written before the checks: none
    ]
    lines = terminal_lines(document([run_entry("m", 8, 80.0)], gates, ["m"]))
    start = lines.index("cross-checks against the baselines' outputs:")
    assert lines[start + 1 : start + 3] == [f"m @ 8: {canary}", f"n @ 4: {old}"]
    assert lines[start - 1] == "" and start > lines.index("improvements beyond tolerance:")
    quiet = terminal_lines(document([run_entry("m", 8, 80.0)], gates[2:], ["m"]))
    assert "cross-checks against the baselines' outputs:" not in quiet


def test_under_llmperf_gpus_the_summary_says_which_slot_ran_each_server():
    def on(name, gpus, worker):
        return run_entry(name, 8, 10.0, provenance={"target": "gpu", "gpu_ids": gpus}, worker=worker)

    gw0 = document([on("a", ["0"], "gw0"), on("a-mtp", ["0"], "gw0")], [], ["a", "a-mtp"])
    gw1 = document([on("b", ["2", "3"], "gw1")], [], ["b"])
    lines = terminal_lines(merge_reports({"gw0": gw0, "gw1": gw1}))
    assert lines[1] == "GPU slots: GPUs 0 (gw0): a, a-mtp; GPUs 2,3 (gw1): b"
    assert not any(
        line.startswith("GPU slots") for line in terminal_lines(document([run_entry("c", 1, 1.0)], [], ["c"]))
    )


def test_a_runs_checks_are_listed_once_and_unchanged_outputs_on_one_line():
    same = "outputs: unchanged for all 12 prompts (temperature 0; canary, not gated)"
    short = "output lengths: not judged, 4 prompts completed by both runs (fewer than 10)"
    gates = [
        gate_entry("t::base1", "base", 1, [IMPROVED], checks=[same, short]),
        gate_entry("t::base8", "base", 8, [IMPROVED], checks=[same]),
        gate_entry("t::mtp8", "mtp", 8, [IMPROVED], checks=[same]),
        gate_entry("t::speedup8", "mtp", 8, [IMPROVED], checks=[same]),  # the same run, a second test
    ]
    lines = terminal_lines(document([run_entry("base", 8, 80.0)], gates, ["base"]))
    start = lines.index("cross-checks against the baselines' outputs:")
    assert lines[start + 1 :] == [
        "outputs unchanged in 3 run(s) (temperature 0; canary, not gated): base @ 1, 8; mtp @ 8",
        f"base @ 1: {short}",
    ]


def test_the_summary_says_how_many_cells_were_judged_and_when_a_regression_fails_and_lists_suspects():
    suspect = unconfirmed(compare("decode_tok_s", 100.0, 93.0, Tolerance("relative", 0.05), "higher"), 0, 1)
    runs = [run_entry("m", 8, 93.0), run_entry("n", 4, 130.0)]
    gates = [gate_entry("t::a", "m", 8, [suspect], outcome="warn"), gate_entry("t::b", "n", 4, [IMPROVED])]
    lines = terminal_lines(document(runs, gates, ["m", "n"], confirm=2))
    assert (
        "2 gated cell(s); judged on the tolerance alone: no chance of a false red stated; a regression fails "
        "when 2 sessions in a row read it, or at once beyond twice its tolerance (--llmperf-confirm 2)"
    ) in lines
    start = lines.index("suspect: a regression the sessions before did not read (its test passed with a warning):")
    assert lines[start + 1] == f"m @ 8: {suspect.hint}" and "?! suspect" in "\n".join(lines)
    once = terminal_lines(document(runs, gates[1:], ["m", "n"]))  # a document without the option: fail at once
    assert any(
        line.startswith("1 gated cell(s); ") and line.endswith("fails at once (--llmperf-confirm 1)") for line in once
    )
    assert not any(line.startswith("suspect:") for line in once)


def test_the_summary_bounds_a_false_red_by_the_judged_cells_chances_summed():
    noisy = dataclasses.replace(
        compare("decode_tok_s", 100.0, 99.0, Tolerance("relative", 0.05), "higher"), false_red=0.012
    )
    quiet = dataclasses.replace(IMPROVED, false_red=0.0005)
    missing = compare("decode_tok_s", None, 99.0, Tolerance("relative", 0.05), "higher")  # fails for itself
    gates = [gate_entry("t::a", "m", 8, [noisy, missing]), gate_entry("t::b", "n", 4, [quiet])]
    lines = terminal_lines(document([run_entry("m", 8, 99.0)], gates, ["m", "n"], confirm=2))
    assert any(line.startswith("3 gated cell(s); chance of a false red this session <= 1.2 %; ") for line in lines)
