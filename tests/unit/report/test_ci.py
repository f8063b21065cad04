"""CI outputs: the GitHub step summary (the report's Markdown, appended) and a test's
JUnit properties."""

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.ci import PLOTS_NOTE, append_step_summary, junit_properties
from pytest_llmperf.report.markdown import markdown_summary
from tests.unit.report.documents import IMPROVED, REGRESSED, document, gate_entry, run_entry

OK_RATE = compare("acceptance_rate", 0.67, 0.66, Tolerance("absolute", 0.03), "higher")


def doc():
    gates = [
        gate_entry("t::a", "m", 8, [REGRESSED, OK_RATE], outcome="fail"),
        gate_entry("t::b", "n", 4, [IMPROVED]),
        gate_entry("t::c", "m", 32, [], outcome="refused", message="baseline m.json: other workload\nDifferences: ..."),
    ]
    return document([run_entry("m", 8, 80.0), run_entry("n", 4, 130.0)], gates, ["m", "n"])


def test_the_step_summary_is_appended_only_where_github_says(tmp_path):
    assert append_step_summary(doc(), {}) is None
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n")
    assert append_step_summary(doc(), {"GITHUB_STEP_SUMMARY": str(path)}) == path
    text = path.read_text()
    # the report's Markdown summary (summary.md's, tested in test_markdown.py), once
    assert text == "# earlier step\n" + markdown_summary(doc(), plots_note=PLOTS_NOTE) + "\n"
    assert text.count("# pytest-llmperf report") == 1 and "| decode_tok_s |" in text.replace("`", "")


def test_junit_properties_name_each_runs_figures_and_each_gated_metric():
    props = dict(
        junit_properties(
            [("m", 8, {"decode_tok_s": 80.04, "acceptance_rate": None, "ttft_ms_median": 40.0})],
            [("m", 8, "fail", [REGRESSED, OK_RATE])],
        )
    )
    assert props == {
        "llmperf.m@8.decode_tok_s": "80.0",
        "llmperf.m@8.ttft_ms_median": "40.0",
        "llmperf.m@8.outcome": "fail",
        "llmperf.m@8.decode_tok_s.verdict": "regressed",
        "llmperf.m@8.decode_tok_s.baseline": "100.0",
        "llmperf.m@8.decode_tok_s.change": "-20.0% (-20.0)",
        "llmperf.m@8.acceptance_rate": "0.660",
        "llmperf.m@8.acceptance_rate.verdict": "pass",
        "llmperf.m@8.acceptance_rate.baseline": "0.670",
        "llmperf.m@8.acceptance_rate.change": "-0.010 (-1.5%)",
    }


def test_junit_properties_carry_goodput_only_where_slos_were_given():
    with_slos = dict(junit_properties([("m", 8, {"request_goodput": 1.5, "slo_attainment": 0.75})], []))
    assert with_slos == {"llmperf.m@8.request_goodput": "1.500", "llmperf.m@8.slo_attainment": "0.750"}
    without = dict(junit_properties([("m", 8, {"request_goodput": None, "slo_attainment": None})], []))
    assert without == {}
