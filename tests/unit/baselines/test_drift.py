"""Drift detection on known histories (Apache Otava's E-Divisive, installed by [dev])."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_llmperf.baselines import drift
from pytest_llmperf.baselines.history import History
from pytest_llmperf.report.history import drift_lines

pytest.importorskip("otava.analysis", reason="apache-otava is not installed: pip install -e '.[dev]'")


def noisy(levels, noise=0.01, seed=0, base=400.0):
    rng = np.random.default_rng(seed)
    return [base * level * (1 + rng.normal(0, noise)) for level in levels]


def nightly(values, metric="steady_decode_tok_s", outcomes=None, image=lambda i: f"vllm/vllm-openai:nightly-{i:02d}"):
    return [
        {
            "date": f"2026-11-{i + 1:02d}T02:00:00+00:00",
            "server": "qwen",
            "concurrency": 8,
            "metric": metric,
            "value": v,
            "outcome": (outcomes or {}).get(i, "pass"),
            "target": "sim",
            "workload": "w",
            "image": image(i),
        }
        for i, v in enumerate(values)
    ]


DRIFT = [1.0] * 12 + [0.985**k for k in range(1, 7)]  # -1.5 % a night for 6 nights: -8.6 %


def test_a_step_at_a_known_index_is_found_with_its_size():
    values = noisy([1.0] * 10 + [0.93] * 8)
    (cp,) = drift.change_points(values)
    assert cp.index == 10
    assert cp.relative == pytest.approx(-0.07, abs=0.01)
    assert cp.before == pytest.approx(np.mean(values[:10]))
    assert cp.after == pytest.approx(np.mean(values[10:]))


def test_the_same_history_gives_the_same_answer():
    values = noisy(DRIFT, seed=3)
    assert drift.change_points(values) == drift.change_points(values)


@pytest.mark.parametrize("seed", range(5))
def test_a_drift_of_1_5_percent_a_night_over_6_nights_is_flagged_while_each_night_passes(seed):
    levels = DRIFT
    # each night against the night before: -1.5 %, inside a 5 % gate
    assert all(abs(b / a - 1) < 0.05 for a, b in zip(levels, levels[1:]))
    lines = nightly(noisy(levels, seed=seed))
    shift = drift.sustained_shift(lines)
    assert shift is not None and shift.worse and shift.passed
    assert shift.start >= 11 and shift.runs >= drift.MIN_RUNS
    assert -0.10 < shift.relative < -0.04
    assert shift.since["image"] == f"vllm/vllm-openai:nightly-{shift.start:02d}"


@pytest.mark.parametrize("seed", range(5))
def test_no_change_flags_nothing(seed):
    lines = nightly(noisy([1.0] * 18, seed=seed))
    assert drift.change_points([line["value"] for line in lines]) == []
    assert drift.sustained_shift(lines) is None


def test_a_shift_whose_gate_failed_is_not_flagged_again():
    lines = nightly(noisy(DRIFT), outcomes={16: "regressed"})
    assert drift.sustained_shift(lines) is None
    shift = drift.latest_shift(lines, drift.change_points([line["value"] for line in lines]))
    assert shift is not None and shift.worse and not shift.passed


def test_an_improvement_and_a_lower_is_better_metric_read_the_right_way():
    faster = nightly(noisy([1.0] * 12 + [1.08] * 6))
    assert drift.sustained_shift(faster) is None  # better: not flagged
    slower_latency = nightly(noisy([1.0] * 12 + [1.08] * 6), metric="tpot_ms_median")
    shift = drift.sustained_shift(slower_latency)
    assert shift is not None and shift.relative > 0.05


def test_a_fresh_shift_waits_for_min_runs():
    lines = nightly(noisy([1.0] * 15 + [0.9] * 2))
    assert drift.sustained_shift(lines) is None  # two runs: not yet sustained


def test_too_few_runs_have_no_change_points():
    assert drift.change_points([400.0, 300.0, 200.0]) == []


def test_the_summary_lines_name_the_fall_the_runs_and_the_image():
    lines = nightly(noisy(DRIFT, seed=1)) + nightly(noisy([1.0] * 18, seed=2), metric="acceptance_length")
    text = drift_lines(History(records=lines))
    assert len(text) == 2 and text[0].startswith("drift: sustained shifts that passed every gate")
    assert "qwen @ 8: steady_decode_tok_s has fallen " in text[1]
    assert " runs since image vllm/vllm-openai:nightly-1" in text[1] and "each passing its gate" in text[1]
    assert drift_lines(History(records=lines), scope=[("qwen", 8, "acceptance_length")]) == []


def test_runs_whose_own_noise_was_wild_are_left_out():
    lines = nightly(noisy([1.0] * 12 + [0.9] * 6, seed=4))
    for line in lines:
        line["noise"] = 2.5
    lines[3].update(value=250.0, noise=74.0, outcome="inconclusive")  # a loaded host that night
    kept, dropped = drift.trusted(lines)
    assert dropped == [lines[3]] and len(kept) == 17
    shift = drift.sustained_shift(lines)
    assert shift is not None and shift.start == 11  # index among the kept runs: the step at night 12
