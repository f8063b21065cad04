"""summary.md from a known result set: its rows and numbers."""

from pytest_llmperf.report.markdown import markdown_summary
from tests.unit.report.sample import REGRESSION_EXPLAINED, sample_document


def test_the_outcome_line_then_failing_tables_first_with_their_explanation():
    text = markdown_summary(sample_document(), ["plots/a.svg"])
    lines = text.splitlines()
    assert lines[0] == "# pytest-llmperf report"
    assert lines[2] == "**FAIL**: 2 of 3 tests failed; target **sim**, profile `smoke`, plugin 0.1.0: 2 fail, 1 pass"
    headings = [line for line in lines if line.startswith("### ")]
    assert headings == [
        "### FAIL: qwen3.6-27b-fp8-mtp @ 8: tests/perf/test_seed.py::test_mtp[8]",
        "### FAIL: qwen3.6-27b-fp8-mtp @ 8: tests/perf/test_seed.py::test_speedup[8]",
        "### pass: qwen3.6-27b-fp8 @ 1: tests/perf/test_seed.py::test_base[1]",
    ]
    assert "| decode_tok_s | 99.0 | 86.0 | -13.1% (-13.0) | +/-2.5% | -5% | **regressed** |" in lines
    assert "| acceptance_rate | 0.670 | 0.660 | -0.010 (-1.5%) | +/-0.008 | -0.03 | pass |" in lines
    assert "| mtp_speedup | 1.600 | 1.430 | -10.6% (-0.170) | +/-4.1% | -5% | **regressed** |" in lines
    table_end = lines.index("| acceptance_rate | 0.670 | 0.660 | -0.010 (-1.5%) | +/-0.008 | -0.03 | pass |")
    assert lines[table_end + 2 : table_end + 4] == [f"> {line}  " for line in REGRESSION_EXPLAINED]


def test_it_opens_with_the_verdict_matrix_as_report_html_does():
    lines = markdown_summary(sample_document(), ["plots/a.svg"]).splitlines()
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Verdict matrix", "## Verdicts", "## Plots", "## Measured", "## Provenance"]
    start = lines.index("## Verdict matrix") + 2
    assert lines[start : start + 4] == [
        "| server | conc | decode_tok_s | mtp_speedup | acceptance_rate |",
        "| --- | ---: | ---: | ---: | ---: |",
        "| qwen3.6-27b-fp8-mtp | 8 | -13.1% **regressed** | -10.6% **regressed** | -0.010 pass |",
        "| qwen3.6-27b-fp8 | 1 | -2.3% inconclusive |  |  |",
    ]


def test_measured_rows_with_the_published_figures_provenance_and_plot_links():
    lines = markdown_summary(sample_document(), ["plots/a.svg"]).splitlines()
    assert "| qwen3.6-27b-fp8-mtp | 8 | 16/16 | 86.0 | - | 90.3 | 400.0 | 75.0 | 0.660 | 2.98 |" in lines
    assert "|   published (ref only) |  |  | 98.0 | - | - | - | 66.3 | - | - |" in lines
    assert "| vLLM version | 0.33.0 | 0.33.0 |" in lines
    assert "| image digest | sha256:1111 | sha256:1111 |" in lines
    assert "| dataset sha256 | 99af0276a84059ec | 99af0276a84059ec |" in lines
    assert "| git commit | 5545e68 | 5545e68 |" in lines
    assert "- [plots/a.svg](plots/a.svg)" in lines


def test_without_plots_it_says_how_to_get_them_and_pipes_in_cells_are_escaped():
    doc = sample_document()
    doc["runs"][0]["server"]["name"] = "a|b"
    text = markdown_summary(doc, [], "plots need matplotlib: pip install 'pytest-llmperf[report]'")
    assert "## Plots\n\nplots need matplotlib: pip install 'pytest-llmperf[report]'\n" in text
    assert "| a\\|b | 1 | 16/16 |" in text


def test_reasoning_columns_appear_in_the_report_only_for_a_reasoning_run():
    doc = sample_document()
    assert "TTFA p50 ms" not in markdown_summary(doc, [])
    doc["runs"][0]["summary"].update({"ttfa_ms_median": 5123.4, "reasoning_share": 0.912})
    lines = markdown_summary(doc, []).splitlines()
    header = next(line for line in lines if line.startswith("| server | conc | completed |"))
    assert header.endswith("| accept len | TTFA p50 ms | reasoning share |")
    assert "| qwen3.6-27b-fp8 | 1 | 16/16 | 21.0 | - | 22.1 | 400.0 | 45.0 | - | - | 5123.4 | 0.912 |" in lines
    assert "| qwen3.6-27b-fp8-mtp | 8 | 16/16 | 86.0 | - | 90.3 | 400.0 | 75.0 | 0.660 | 2.98 | - | - |" in lines


def test_the_output_canary_is_listed_under_its_gates_table():
    doc = sample_document()
    canary = "outputs changed for 2 of 97 prompts at temperature 0 (prompt index 4, 17; canary, not gated): ..."
    passing = next(gate for gate in doc["verdicts"] if gate["outcome"] == "pass")
    passing["checks"] = [canary]
    lines = markdown_summary(doc).splitlines()
    heading = lines.index("### pass: qwen3.6-27b-fp8 @ 1: tests/perf/test_seed.py::test_base[1]")
    assert f"- {canary}" in lines[heading:] and f"- {canary}" not in lines[:heading]


def test_each_capacity_search_is_one_line_with_its_verdict():
    doc = sample_document()
    assert "## Capacity at SLOs" not in markdown_summary(doc)
    doc["capacities"] = [
        {
            "test": "t.py::test_capacity",
            "server": "m",
            "line": "capacity 2 users (2-4): p50 TPOT 24.5 ms exceeded at 4 (27.5 ms); p50 TTFT held; 3 runs, 7 s",
            "verdict": "capacity 8 -> 2 users, regressed: p50 TPOT 24.5 ms exceeded at 4 (27.5 ms); p50 TTFT held",
        }
    ]
    text = markdown_summary(doc)
    assert (
        "- `m` (t.py::test_capacity): capacity 2 users (2-4): p50 TPOT 24.5 ms exceeded at 4 (27.5 ms); p50 TTFT "
        "held; 3 runs, 7 s; capacity 8 -> 2 users, regressed:"
    ) in text
    assert text.index("## Capacity at SLOs") < text.index("## Plots")
