import pytest

from pytest_llmperf.baselines.tolerances import (
    DEFAULT_TOLERANCES,
    DIRECTIONS,
    Direction,
    Tolerance,
    direction_for,
    parse_tolerance,
    parse_tolerance_overrides,
    tolerance_for,
)


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


def test_defaults_match_issue_4():
    assert DEFAULT_TOLERANCES["decode_tok_s"] == Tolerance("relative", 0.05)
    assert DEFAULT_TOLERANCES["acceptance_rate"] == Tolerance("absolute", 0.03)
    assert DEFAULT_TOLERANCES["mtp_speedup"] == Tolerance("relative", 0.05)
    for m in ("ttft_ms_median", "tpot_ms_median", "itl_ms_median", "e2el_ms_median"):
        assert DEFAULT_TOLERANCES[m] == Tolerance("relative", 0.10)
        assert DIRECTIONS[m] is Direction.LOWER
    for m in (
        "decode_tok_s",
        "prefill_tok_s",
        "request_throughput",
        "acceptance_length",
        "acceptance_rate",
        "mtp_speedup",
    ):
        assert DIRECTIONS[m] is Direction.HIGHER
    assert set(DEFAULT_TOLERANCES) == set(DIRECTIONS)


def test_tolerance_for_precedence_marker_over_ini_over_default():
    marker = {"decode_tok_s": "3%"}
    ini = {"decode_tok_s": "8%", "ttft_ms_median": "20%"}
    assert tolerance_for("decode_tok_s", marker, ini) == Tolerance("relative", 0.03)
    assert tolerance_for("ttft_ms_median", marker, ini) == Tolerance("relative", 0.20)
    assert tolerance_for("acceptance_rate", marker, ini) == Tolerance("absolute", 0.03)
    assert tolerance_for("acceptance_rate", None) == Tolerance("absolute", 0.03)


def test_unknown_metric_needs_a_tolerance():
    with pytest.raises(ValueError, match="unknown metric 'gpu_joules'"):
        tolerance_for("gpu_joules")
    assert tolerance_for("gpu_joules", {"gpu_joules": "7%"}) == Tolerance("relative", 0.07)


def test_bad_override_names_the_metric():
    with pytest.raises(ValueError, match="tolerance for decode_tok_s"):
        tolerance_for("decode_tok_s", {"decode_tok_s": "lots"})


def test_direction_for_table_then_naming_then_recorded():
    assert direction_for("decode_tok_s") is Direction.HIGHER
    assert direction_for("ttft_ms_p99") is Direction.LOWER
    assert direction_for("per_stream_tok_s") is Direction.HIGHER  # "_s" of a rate, not seconds
    assert direction_for("total_tok_s") is Direction.HIGHER
    assert direction_for("duration_s") is Direction.LOWER
    assert direction_for("acceptance_pos1") is Direction.HIGHER
    assert direction_for("completed") is Direction.HIGHER
    assert direction_for("total_output_tokens") is Direction.HIGHER
    assert direction_for("failed") is Direction.LOWER
    assert direction_for("acceptance_per_pos_0") is Direction.HIGHER
    assert direction_for("weird_metric", "lower") is Direction.LOWER
    with pytest.raises(ValueError, match="no direction known"):
        direction_for("weird_metric")
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


def test_every_scalar_of_the_run_summary_has_a_direction():
    # --update-baselines records every figure of a run; none may be unrecordable.
    import dataclasses

    from pytest_llmperf.metrics.summary import Summary

    non_scalar = {"acceptance_per_position", "spec_status", "notes"}
    names = [f.name for f in dataclasses.fields(Summary) if f.name not in non_scalar]
    assert "decode_tok_s" in names
    for name in names + ["acceptance_pos1", "mtp_speedup"]:
        assert isinstance(direction_for(name), Direction), name
