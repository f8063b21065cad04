import pytest

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.table import (
    PUBLISHED_HEADER,
    SummaryRow,
    format_change,
    format_summary_table,
    format_value,
    format_verdict_table,
)

REL5 = Tolerance("relative", 0.05)
REL10 = Tolerance("relative", 0.10)
ABS003 = Tolerance("absolute", 0.03)

REGRESSED = compare("decode_tok_s", 407.9, 380.2, REL5, "higher")
OK_RATE = compare("acceptance_rate", 0.67, 0.66, ABS003, "higher")
IMPROVED = compare("ttft_ms_median", 624.0, 500.0, REL10, "lower", update_command="pytest t.py::a --update-baselines")
MISSING = compare("mtp_speedup", None, 1.426, REL5, "higher", update_command="pytest t.py::b --update-baselines")
NO_DATA = compare("acceptance_length", 3.0, None, REL5, "higher", no_data_reason="server ran with --disable-log-stats")


def rows_of(text):
    return [line for line in text.splitlines()]


def test_format_value_precision_per_metric():
    assert format_value("decode_tok_s", 407.91234) == "407.9"
    assert format_value("acceptance_rate", 0.6712) == "0.671"
    assert format_value("acceptance_length", 3.04) == "3.04"
    assert format_value("mtp_speedup", 1.42622) == "1.426"
    assert format_value("ttft_ms_median", 624.04) == "624.0"
    assert format_value("completed", 118) == "118"
    with pytest.raises(ValueError, match="unknown metric 'something_else'"):
        format_value("something_else", 1234.56)
    assert format_value("decode_tok_s", None) == "-"


def test_format_change_leads_with_the_tolerance_kind():
    assert format_change(REGRESSED) == "-6.8% (-27.7)"
    assert format_change(OK_RATE) == "-0.010 (-1.5%)"
    assert format_change(compare("decode_tok_s", 100.0, 110.0, REL5, "higher")) == "+10.0% (+10.0)"
    assert format_change(MISSING) == "-"


def test_format_change_never_prints_the_limit_beside_a_crossed_verdict():
    hair = compare("decode_tok_s", 100.0, 94.99, REL5, "higher")
    assert hair.status == "regressed"
    assert format_change(hair) == "-5.01% (-5.0)"
    rate = compare("acceptance_rate", 0.67, 0.6399, ABS003, "higher")
    assert rate.status == "regressed"
    assert format_change(rate).startswith("-0.0301 ")
    at_limit = compare("decode_tok_s", 100.0, 95.0, REL5, "higher")
    assert format_change(at_limit) == "-5.0% (-5.0)"  # passing: no extra digits


def test_verdict_table_has_header_numbers_and_words():
    text = format_verdict_table([REGRESSED, OK_RATE, IMPROVED, MISSING, NO_DATA], title="qwen mtp @ conc 32")
    lines = rows_of(text)
    assert lines[0] == "qwen mtp @ conc 32"
    assert lines[1].split() == ["metric", "baseline", "measured", "change", "noise", "allowed", "verdict"]
    row = next(line for line in lines if line.startswith("decode_tok_s"))
    assert row.split() == ["decode_tok_s", "407.9", "380.2", "-6.8%", "(-27.7)", "-", "-5%", "!!", "REGRESSED"]
    rate = next(line for line in lines if line.startswith("acceptance_rate"))
    assert rate.split() == ["acceptance_rate", "0.670", "0.660", "-0.010", "(-1.5%)", "-", "-0.03", "pass"]
    assert "improved" in next(line for line in lines if line.startswith("ttft_ms_median"))
    assert "MISSING BASELINE" in next(line for line in lines if line.startswith("mtp_speedup"))
    assert "NO DATA" in next(line for line in lines if line.startswith("acceptance_length"))
    assert "(1 regressed, 1 no-data, 1 missing-baseline, 1 improved, 1 pass)" in text
    # hints carry the commands and the no-data reason
    assert "pytest t.py::a --update-baselines" in text
    assert "pytest t.py::b --update-baselines" in text
    assert "--disable-log-stats" in text


def test_verdict_table_columns_are_aligned():
    text = format_verdict_table([REGRESSED, OK_RATE])
    header, rule, *rows = rows_of(text)[:4]
    # the verdict column starts at the same offset on every line
    start = header.index("verdict")
    assert rule[start - 2 : start] == "  " and rule[start] == "-"
    assert all(r[start:].strip() in ("!! REGRESSED", "pass") for r in rows)
    # numbers are right-aligned under their header
    end = header.index("baseline") + len("baseline")
    assert all(r[:end].endswith(v) for r, v in zip(rows, ["407.9", "0.670"]))


def test_a_regression_beside_faults_names_them_and_is_not_offered_for_re_recording():
    faults = "2 of 64 failed: 2x connection reset (within the error budget 5%)"
    text = format_verdict_table([REGRESSED, OK_RATE], faults=faults)
    assert f"faults during the run: {faults}; a change beside them may be these faults" in text
    assert "re-record" not in text.replace("before re-recording", "")
    assert "re-record decode_tok_s" in format_verdict_table([REGRESSED, OK_RATE])


def test_passing_table_has_no_hints_section():
    text = format_verdict_table([OK_RATE])
    assert "hints:" not in text and "REGRESSED" not in text


def test_the_summary_table_groups_servers_by_concurrency_and_shows_published_reference():
    rows = [
        SummaryRow(32, REGRESSED, published=407.9),
        SummaryRow(8, OK_RATE),
        SummaryRow(32, OK_RATE, 0.67),
    ]
    text = format_summary_table({"qwen3.6-35b-a3b-fp8-mtp": rows, "base": [SummaryRow(1, OK_RATE)]})
    lines = rows_of(text)
    assert lines[0] == "llmperf verdicts:"
    assert lines[1].split()[:3] == ["server", "conc", "metric"] and PUBLISHED_HEADER in lines[1]
    body = lines[3:7]
    assert body[0].split()[:3] == ["qwen3.6-35b-a3b-fp8-mtp", "8", "acceptance_rate"]  # sorted by concurrency
    assert body[1].split()[:2] == ["32", "decode_tok_s"]  # the server not repeated
    assert body[2].split()[0] == "acceptance_rate"  # nor the concurrency
    assert body[1].split()[-1] == "407.9" and "REGRESSED" in body[1]
    assert body[0].split()[-1] == "-"  # no published figure there
    assert body[3].split()[:3] == ["base", "1", "acceptance_rate"]
    assert lines[7] == "(1 regressed, 3 pass)" and "never gating" in text


def test_the_summary_table_without_published_figures_has_no_published_column():
    text = format_summary_table({"sim-base": [SummaryRow(1, OK_RATE)]})
    assert "published" not in text
    assert "0.670" in text and "pass" in text


def test_verdict_line_says_the_failing_verdicts_in_one_line():
    from pytest_llmperf.report.table import verdict_line

    assert verdict_line([REGRESSED]) == "decode_tok_s 407.9 -> 380.2 (-6.8%) regressed"
    dropped = compare("acceptance_rate", 0.67, 0.40, ABS003, "higher")
    assert verdict_line([REGRESSED, dropped]) == (
        "decode_tok_s 407.9 -> 380.2 (-6.8%) regressed; acceptance_rate 0.670 -> 0.400 (-0.270) regressed"
    )  # an absolute tolerance's move in its own terms
    assert verdict_line([MISSING, NO_DATA]) == "mtp_speedup 1.426 missing-baseline; acceptance_length no-data"
    invalid = [compare(m, 100.0, 50.0, REL5, "higher", invalid="20 of 64 failed") for m in ("a_x", "b_y")]
    assert verdict_line(invalid) == "invalid run: 20 of 64 failed"  # once, not per metric
    assert "\n" not in verdict_line([*invalid, REGRESSED])
