"""Tolerances parsed once into Bounds that answer whether a move fails."""

import pytest

from pytest_llmperf.baselines.compare import compare_metrics
from pytest_llmperf.baselines.tolerances import Bound, Tolerances
from pytest_llmperf.metrics.registry import Direction, Tolerance

FIVE = Tolerance("relative", 0.05)


def test_a_bound_answers_whether_a_move_fails_in_the_worse_direction():
    higher, lower = Bound(FIVE, Direction.HIGHER), Bound(FIVE, Direction.LOWER)
    assert higher.allowed == "-5%" and lower.allowed == "+5%"
    assert higher.fails(100.0, 94.0) and not higher.fails(100.0, 106.0)
    assert lower.fails(100.0, 106.0) and not lower.fails(100.0, 94.0)
    assert not higher.fails(407.9, 407.9 * 0.95)  # exactly the tolerance, float noise aside
    assert higher.in_units(-5.0, 100.0) == pytest.approx(-0.05) and higher.worse(-5.0) == 5.0
    assert higher.in_units(1.0, 0.0) is None and higher.fails(0.0, -1.0)  # relative to 0: infinitely large
    absolute = Bound(Tolerance("absolute", 0.03), Direction.HIGHER)
    assert absolute.in_units(-0.04, 0.7) == -0.04 and absolute.fails(0.70, 0.66) and not absolute.fails(0.70, 0.68)


def test_tolerances_take_the_most_specific_layer_and_parse_each_metric_once():
    assertion = {"decode_tok_s": "3%"}
    marker = {"decode_tok_s": "8%", "ttft_ms_median": "20%"}
    tolerances = Tolerances(assertion, marker, None)
    assert tolerances.tolerance("decode_tok_s") == Tolerance("relative", 0.03)
    assert tolerances.bound("ttft_ms_median") == Bound(Tolerance("relative", 0.20), Direction.LOWER)
    assert tolerances.tolerance("acceptance_rate") == Tolerance("absolute", 0.02)  # the registry's default
    assertion["decode_tok_s"] = "lots"  # parsed already: not read again
    assert tolerances.tolerance("decode_tok_s") == Tolerance("relative", 0.03)
    with pytest.raises(ValueError, match="tolerance for decode_tok_s: invalid tolerance 'lots'"):
        Tolerances(assertion).tolerance("decode_tok_s")


def test_the_rule_takes_parsed_tolerances_as_it_takes_their_layers():
    layers = ({"decode_tok_s": "3%"}, {"decode_tok_s": "8%"})
    by_layers = compare_metrics(
        ["decode_tok_s"], {"decode_tok_s": {"value": 100.0}}, {"decode_tok_s": 95.0}, overrides=layers
    )
    parsed = compare_metrics(
        ["decode_tok_s"], {"decode_tok_s": {"value": 100.0}}, {"decode_tok_s": 95.0}, overrides=Tolerances(*layers)
    )
    assert by_layers == parsed and parsed[0].status == "regressed" and parsed[0].allowed == "-3%"
    assert parsed[0].bound == Bound(Tolerance("relative", 0.03), Direction.HIGHER)
