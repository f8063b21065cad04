"""Paired noise of a change from per-request figures (metrics/uncertainty.py), known inputs."""

import warnings
from dataclasses import replace

import numpy as np
import pytest

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import REGISTRY, metric, using
from pytest_llmperf.metrics.uncertainty import (
    decode_rows,
    encode_rows,
    independent_blocks,
    paired_errors,
    request_rows,
    row_percentiles,
)


def record(index, send, ttft, tokens=10, chunks=None, gap=0.01, ok=True):
    chunks = chunks or tokens
    times = [send + ttft + k * gap for k in range(chunks)]
    return RequestRecord(
        index=index,
        send_time=send,
        chunk_times=times,
        end_time=times[-1],
        prompt_tokens=20,
        completion_tokens=tokens,
        status=200,
        error=None if ok else "boom",
    )


def rows(ttfts, tokens=10, chunks=None, gap_ms=10.0):
    """Rows as request_rows makes them: TTFT and E2EL in ms, dispatch order = list order."""
    out = []
    for i, t in enumerate(ttfts):
        c = (chunks[i] if isinstance(chunks, list) else chunks) or tokens
        out.append((i, 20, tokens, c, float(t), float(t) + (c - 1) * gap_ms))
    return out


def test_request_rows_are_in_dispatch_order_in_real_time_and_skip_failures():
    recs = [record(5, 2.0, 0.1), record(3, 1.0, 0.2), record(7, 3.0, 0.1, ok=False)]
    got = request_rows(recs, clock_speed=10.0)
    assert [r[0] for r in got] == [3, 5]
    index, prompt, out, chunks, ttft, e2el = got[0]
    assert (prompt, out, chunks) == (20, 10, 10)
    assert ttft == pytest.approx(2000.0) and e2el == pytest.approx(2000.0 + 9 * 100.0)


def test_rows_round_trip_as_text_lines_and_bad_lines_are_named():
    original = rows([100.5, 200.25, 3000.125])
    back = decode_rows(encode_rows(original))
    assert [r[:4] for r in back] == [r[:4] for r in original]
    assert [r[4:] for r in back] == [pytest.approx(r[4:], rel=1e-5) for r in original]
    with pytest.raises(ValueError, match="request row 1"):
        decode_rows(["0 20 10 10 1 2", "1 20 10"])
    with pytest.raises(ValueError, match="impossible times"):
        decode_rows(["0 20 10 10 50 40"])


def test_identical_runs_have_no_noise():
    base = rows(np.linspace(100, 900, 40))
    figures = {"decode_tok_s": 100.0, "acceptance_rate": 0.6}
    errors = paired_errors(
        base, base, figures, figures, ["ttft_ms_median", "tpot_ms_mean", "decode_tok_s"], concurrency=8
    )
    assert errors == {"ttft_ms_median": 0.0, "tpot_ms_mean": 0.0, "decode_tok_s": 0.0}


def test_a_uniform_shift_is_a_change_not_noise():
    base = rows(np.linspace(100, 900, 40))
    shifted = rows(np.linspace(100, 900, 40) + 50.0)
    errors = paired_errors(base, shifted, {}, {}, ["ttft_ms_mean", "ttft_ms_median"], concurrency=8)
    assert errors["ttft_ms_mean"] == pytest.approx(0.0, abs=1e-9)
    assert errors["ttft_ms_median"] == pytest.approx(0.0, abs=1e-9)


def test_requests_that_move_differently_between_runs_make_noise():
    rng = np.random.default_rng(1)
    ttft = rng.uniform(100, 900, 60)
    base, moved = rows(ttft), rows(ttft + rng.normal(0, 40, 60))
    errors = paired_errors(base, moved, {}, {}, ["ttft_ms_mean"], concurrency=1)
    # i.i.d. per-request moves of sd 40 over 60 requests: the mean's error is about 40 / sqrt(60)
    assert errors["ttft_ms_mean"] == pytest.approx(40 / np.sqrt(60), rel=0.3)


def test_waves_are_resampled_together():
    """A wave of 8 requests that moved together is one unit: blocks of 8 see the noise that
    single-request resampling spreads thin."""
    base_ttft = np.repeat([500.0, 1000.0, 1500.0, 2000.0, 2500.0, 3000.0], 8)
    moved = base_ttft + np.repeat([0.0, 300.0, -300.0, 0.0, 300.0, -300.0], 8)
    by_wave = paired_errors(rows(base_ttft), rows(moved), {}, {}, ["ttft_ms_mean"], concurrency=8)
    by_request = paired_errors(rows(base_ttft), rows(moved), {}, {}, ["ttft_ms_mean"], concurrency=1)
    assert by_wave["ttft_ms_mean"] > 1.5 * by_request["ttft_ms_mean"]
    assert independent_blocks(rows(base_ttft), rows(moved), 8) == 6


def test_only_prompts_both_runs_completed_are_paired():
    base = rows([100.0] * 10)
    measured = [r for r in rows([100.0] * 10) if r[0] % 2 == 0]
    assert independent_blocks(base, measured, 1) == 5
    assert paired_errors(base, measured[:1], {}, {}, ["ttft_ms_mean"]) == {}


def test_acceptance_noise_comes_from_each_requests_chunks():
    # 3 spec tokens: 100 tokens in 40 chunks is 39 drafts and 60 accepted
    chunks = [40] * 20
    base = rows([100.0] * 20, tokens=100, chunks=chunks)
    same = paired_errors(
        base, base, {"acceptance_rate": 0.5}, {"acceptance_rate": 0.5}, ["acceptance_rate", "acceptance_length"]
    )
    assert same == {"acceptance_rate": 0.0}  # no acceptance_length figure given: no estimate
    varied = rows([100.0] * 20, tokens=100, chunks=[30, 50] * 10)
    errors = paired_errors(
        base,
        varied,
        {"acceptance_rate": 0.5, "acceptance_length": 2.5},
        {"acceptance_rate": 0.5, "acceptance_length": 2.5},
        ["acceptance_rate", "acceptance_length"],
    )
    assert errors["acceptance_rate"] > 0 and errors["acceptance_length"] > 0


def test_zero_drafts_give_no_acceptance_estimate():
    base = rows([100.0] * 10, tokens=1, chunks=1)
    assert paired_errors(base, base, {"acceptance_rate": 0.0}, {"acceptance_rate": 0.0}, ["acceptance_rate"]) == {}


@pytest.mark.parametrize("tokens, chunks", [(1, 1), (10, 10)], ids=["no drafts", "nothing accepted"])
def test_acceptance_length_without_drafts_or_acceptances_has_no_estimate(tokens, chunks):
    # Once a TypeError (1.0 + None): an MTP run that accepted nothing broke its verdicts.
    base = rows([100.0] * 10, tokens=tokens, chunks=chunks)
    figures = {"acceptance_length": 1.0, "acceptance_rate": 0.0}
    assert paired_errors(base, base, figures, figures, ["acceptance_length", "acceptance_rate"]) == {}


def test_the_bootstrap_is_deterministic():
    rng = np.random.default_rng(2)
    a, b = rows(rng.uniform(100, 900, 50)), rows(rng.uniform(100, 900, 50))
    first = paired_errors(a, b, {}, {}, ["ttft_ms_p90"], concurrency=4)
    assert paired_errors(a, b, {}, {}, ["ttft_ms_p90"], concurrency=4) == first


def test_goodput_noise_comes_from_which_requests_met_the_slos_in_each_run():
    rng = np.random.default_rng(4)
    ttft = rng.uniform(100, 900, 60)
    base, moved = rows(ttft), rows(ttft + rng.normal(0, 150, 60))  # requests cross the 500 ms SLO both ways
    names = ["request_goodput", "slo_attainment"]
    slos = {"ttft": 500.0}

    def attainment(r):
        return sum(row[4] <= 500.0 for row in r) / len(r)

    figures_b = {"request_goodput": 2.0 * attainment(base), "slo_attainment": attainment(base)}
    figures_m = {"request_goodput": 2.0 * attainment(moved), "slo_attainment": attainment(moved)}
    assert paired_errors(base, moved, figures_b, figures_m, names, concurrency=1) == {}  # no SLOs, no estimator
    errors = paired_errors(base, moved, figures_b, figures_m, names, concurrency=1, slos=slos)
    crossed = sum((b[4] <= 500.0) != (m[4] <= 500.0) for b, m in zip(base, moved))
    assert crossed == 15  # each a change of 1/60 in the share: its error is about sqrt(15/60 / 60)
    assert errors["slo_attainment"] == pytest.approx(np.sqrt(crossed / 60 / 60), rel=0.25)
    assert errors["request_goodput"] > 0
    same = paired_errors(base, base, figures_b, figures_b, names, concurrency=1, slos=slos)
    assert same == {"request_goodput": 0.0, "slo_attainment": 0.0}


@pytest.mark.parametrize("q", [0, 25, 50, 90, 99, 100])
def test_row_percentiles_are_numpys_nanpercentile_row_by_row(q):
    rng = np.random.default_rng(q)
    values = rng.lognormal(size=(40, 30))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[3] = np.nan  # a row with nothing measured
    values[4, 1:] = np.nan  # one value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns about the all-NaN row
        expected = np.nanpercentile(values, q, axis=1)
    assert np.array_equal(row_percentiles(values, q), expected, equal_nan=True)


def test_the_noise_of_a_metric_is_its_registry_rows_estimator():
    """Every row with an estimator gets a paired error, and no other (ITL, TTFA, counts)."""
    rng = np.random.default_rng(3)

    def rows():
        out = []
        for i in range(60):
            ttft = float(rng.uniform(50, 300))
            e2el = ttft + float(rng.uniform(1000, 3000))
            out.append(
                (i, int(rng.integers(20, 400)), int(rng.integers(100, 200)), int(rng.integers(30, 100)), ttft, e2el)
            )
        return out

    names = [m.name.replace("<i>", "1") for m in REGISTRY.rows]
    figures = dict.fromkeys(names, 2.0)
    errors = paired_errors(rows(), rows(), figures, figures, names, concurrency=8, slos={"ttft": 200.0})
    assert set(errors) == {m.name.replace("<i>", "1") for m in REGISTRY.rows if m.estimator is not None}
    assert {"itl_ms_median", "ttfa_ms_median", "completed", "mtp_speedup"}.isdisjoint(errors)
    assert all(error > 0 for error in errors.values())

    length = REGISTRY.with_rows(replace(metric("acceptance_length"), estimator=None))
    with using(length):  # a row without an estimator is judged on its repetitions alone
        assert "acceptance_length" not in paired_errors(rows(), rows(), figures, figures, names, concurrency=8)
