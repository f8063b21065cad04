import re

import pytest

from pytest_llmperf.baselines.tolerances import (
    parse_tolerance,
    parse_tolerance_overrides,
    parse_tolerances,
    tolerance_for,
)
from pytest_llmperf.metrics.registry import METRICS, Direction, Tolerance, UnknownMetric


@pytest.mark.parametrize(
    "text, kind, limit",
    [
        ("5%", "relative", 0.05),
        ("-5%", "relative", 0.05),
        ("+10%", "relative", 0.10),
        (" 2.5 % ", "relative", 0.025),
        ("0.03", "absolute", 0.03),
        ("-0.03", "absolute", 0.03),
        (".5", "absolute", 0.5),
        ("0", "absolute", 0.0),
        ("1e-2", "absolute", 0.01),
    ],
)
def test_parse_tolerance_forms(text, kind, limit):
    tol = parse_tolerance(text)
    assert tol.kind == kind
    assert tol.limit == pytest.approx(limit)


@pytest.mark.parametrize("bad", ["", "five", "5%%", "%5", "5 percent", "--5%", "nan", "inf", "5%abs"])
def test_parse_tolerance_rejects_with_accepted_forms(bad):
    with pytest.raises(ValueError) as exc:
        parse_tolerance(bad)
    assert "accepted forms" in str(exc.value)
    assert repr(bad) in str(exc.value)


def test_parse_tolerance_rejects_bare_numbers_as_ambiguous():
    with pytest.raises(ValueError, match="must be a string"):
        parse_tolerance(0.05)


def test_tolerance_validates_kind_and_limit():
    with pytest.raises(ValueError, match="relative"):
        Tolerance("percent", 0.05)
    with pytest.raises(ValueError, match=">= 0"):
        Tolerance("relative", -0.05)
    with pytest.raises(ValueError, match="number"):
        Tolerance("absolute", "0.03")


def test_allowed_text_carries_the_direction_of_the_worse_move():
    assert Tolerance("relative", 0.05).allowed(Direction.HIGHER) == "-5%"
    assert Tolerance("relative", 0.10).allowed(Direction.LOWER) == "+10%"
    assert Tolerance("absolute", 0.03).allowed("higher") == "-0.03"


def test_defaults_match_issue_4_and_the_gated_decode_figure_catches_a_5_percent_drop():
    defaults = {name: m.tolerance for name, m in METRICS.items() if m.tolerance is not None}
    assert defaults == {
        "decode_tok_s": Tolerance("relative", 0.05),
        "steady_decode_tok_s": Tolerance("relative", 0.03),
        "prefill_tok_s": Tolerance("relative", 0.05),
        "request_throughput": Tolerance("relative", 0.05),
        # goodput at SLOs: as request throughput; its share of the completed, 5 points
        "request_goodput": Tolerance("relative", 0.05),
        "slo_attainment": Tolerance("absolute", 0.05),
        "acceptance_length": Tolerance("relative", 0.05),
        "acceptance_rate": Tolerance("absolute", 0.02),  # catches a 0.03 drop
        "mtp_speedup": Tolerance("relative", 0.03),  # a 5 % speedup loss read past it (docs/verdicts.md)
        **{f"{m}_ms_median": Tolerance("relative", 0.10) for m in ("ttft", "tpot", "itl", "e2el")},
        "capacity": Tolerance("relative", 0.10),  # provisional: one search step at 32 users and up
        "ttfa_ms_median": Tolerance("relative", 0.10),  # a reasoning model's, as TTFT's
    }
    for m in ("ttft_ms_median", "tpot_ms_median", "itl_ms_median", "e2el_ms_median"):
        assert METRICS[m].direction is Direction.LOWER


def test_tolerance_for_precedence_marker_over_ini_over_default():
    marker = {"decode_tok_s": "3%"}
    ini = {"decode_tok_s": "8%", "ttft_ms_median": "20%"}
    assert tolerance_for("decode_tok_s", marker, ini) == Tolerance("relative", 0.03)
    assert tolerance_for("ttft_ms_median", marker, ini) == Tolerance("relative", 0.20)
    assert tolerance_for("acceptance_rate", marker, ini) == Tolerance("absolute", 0.02)
    assert tolerance_for("acceptance_rate", None) == Tolerance("absolute", 0.02)


def test_unknown_metric_is_an_error_and_a_known_one_without_default_needs_a_tolerance():
    with pytest.raises(UnknownMetric, match="unknown metric 'gpu_joules'"):
        tolerance_for("gpu_joules", {"gpu_joules": "7%"})
    with pytest.raises(ValueError, match="ttft_ms_p99 has no default tolerance; give one"):
        tolerance_for("ttft_ms_p99")
    assert tolerance_for("ttft_ms_p99", {"ttft_ms_p99": "7%"}) == Tolerance("relative", 0.07)


def test_marker_tolerances_are_checked_by_name_and_form():
    assert parse_tolerances({"decode_tok_s": "3%"}) == {"decode_tok_s": Tolerance("relative", 0.03)}
    with pytest.raises(UnknownMetric, match="t.py: unknown metric 'decode_tok'; did you mean decode_tok_s"):
        parse_tolerances({"decode_tok": "3%"}, "t.py: ")
    with pytest.raises(ValueError, match="tolerance for decode_tok_s: invalid tolerance 'lots'"):
        parse_tolerances({"decode_tok_s": "lots"})
    with pytest.raises(ValueError, match="must be a dict"):
        parse_tolerances(["decode_tok_s"])


def test_bad_override_names_the_metric():
    with pytest.raises(ValueError, match="tolerance for decode_tok_s"):
        tolerance_for("decode_tok_s", {"decode_tok_s": "lots"})


def test_direction_parse():
    assert Direction.parse(" Lower") is Direction.LOWER
    with pytest.raises(ValueError, match="'higher' or 'lower'"):
        Direction.parse("up")


def test_parse_tolerance_overrides_ini_form():
    text = """
        decode_tok_s = 3%   # tighter on the H200
        acceptance_rate = 0.02
    """
    assert parse_tolerance_overrides(text) == {
        "decode_tok_s": Tolerance("relative", 0.03),
        "acceptance_rate": Tolerance("absolute", 0.02),
    }
    assert parse_tolerance_overrides("decode_tok_s=3%, ttft_ms_median=+15%")["ttft_ms_median"] == Tolerance(
        "relative", 0.15
    )
    assert parse_tolerance_overrides("") == {}
    with pytest.raises(ValueError, match="expected 'metric = tolerance'"):
        parse_tolerance_overrides("decode_tok_s 3%")
    with pytest.raises(ValueError, match="tolerance override for decode_tok_s"):
        parse_tolerance_overrides("decode_tok_s = x")
    with pytest.raises(UnknownMetric, match="tolerance override: unknown metric 'tpot_median'; did you mean"):
        parse_tolerance_overrides("tpot_median = 5%")


@pytest.mark.parametrize(
    "name, text, tolerance",
    [
        ("decode_tok_s", "-5%", Tolerance("relative", 0.05)),  # higher is better: it may drop 5 %
        ("ttft_ms_median", "+10%", Tolerance("relative", 0.10)),  # lower is better: it may rise 10 %
        ("acceptance_rate", "-0.03", Tolerance("absolute", 0.03)),
        ("acceptance_pos2", "-0.05", Tolerance("absolute", 0.05)),
        ("ttft_ms_median", "10%", Tolerance("relative", 0.10)),  # no sign: the direction is the metric's
    ],
)
def test_a_sign_matching_the_metrics_worse_direction_reads_as_its_magnitude(name, text, tolerance):
    assert parse_tolerance(text, name) == tolerance
    assert parse_tolerances({name: text}) == {name: tolerance}
    assert parse_tolerance_overrides(f"{name} = {text}") == {name: tolerance}
    assert tolerance_for(name, {name: text}) == tolerance


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "ttft_ms_median",
            "-5%",
            "'-5%' has the wrong sign: ttft_ms_median is lower-is-better, so a regression is a rise; "
            "write '5%' or '+5%'",
        ),
        (
            "decode_tok_s",
            "+5%",
            "'+5%' has the wrong sign: decode_tok_s is higher-is-better, so a regression is a drop; "
            "write '5%' or '-5%'",
        ),
        (
            "acceptance_rate",
            "+0.03",
            "'+0.03' has the wrong sign: acceptance_rate is higher-is-better, so a regression is a drop; "
            "write '0.03' or '-0.03'",
        ),
    ],
)
def test_a_sign_against_the_metrics_direction_is_refused_not_flipped(name, text, message):
    """ "-5%" on TTFT was read as "+5%": the sign said the opposite of what was applied."""
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_tolerance(text, name)
    with pytest.raises(ValueError, match=re.escape(f"t.py: tolerance for {name}: {message}")):
        parse_tolerances({name: text}, "t.py: ")
    with pytest.raises(ValueError, match=re.escape(f"tolerance override for {name}: {message}")):
        parse_tolerance_overrides(f"{name} = {text}")
    with pytest.raises(ValueError, match=re.escape(f"tolerance for {name}: {message}")):
        tolerance_for(name, {name: text})


def test_without_a_metric_there_is_no_direction_to_check_a_sign_against():
    assert parse_tolerance("+5%") == parse_tolerance("-5%") == Tolerance("relative", 0.05)
