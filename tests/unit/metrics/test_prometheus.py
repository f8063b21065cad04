"""parse_snapshot / spec_decode_delta against real vLLM 0.32 pages and hand-made excerpts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_llmperf.metrics import prometheus as prom
from pytest_llmperf.metrics.prometheus import (
    ACCEPTED,
    ACCEPTED_PER_POS,
    DRAFT_TOKENS,
    DRAFTS,
    GENERATION_TOKENS,
    parse_snapshot,
    spec_decode_delta,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
FULL_PAGE = FIXTURES / "vllm-0.32-cpu-ngram-metrics.txt"
LOG_EXCERPT = FIXTURES / "vllm-0.32-cpu-specdecode-log.txt"


def page(drafts, draft_tokens, accepted, per_pos, generation=None, engine="0", created=True):
    """A /metrics excerpt shaped like vLLM's (counter families plus *_created gauges)."""
    lab = f'engine="{engine}",model_name="m"'
    lines = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {draft_tokens}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {accepted}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {v}' for i, v in enumerate(per_pos)
    ]
    if generation is not None:
        lines += ["# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} {generation}"]
    if created:
        lines += [
            "# TYPE vllm:spec_decode_num_drafts_created gauge",
            f"vllm:spec_decode_num_drafts_created{{{lab}}} 1.7960097062460635e+09",
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- parse_snapshot


def test_full_real_page_keeps_totals_not_created_timestamps():
    snap = parse_snapshot(FULL_PAGE.read_text())
    assert snap.get(DRAFTS) == 132.0
    assert snap.get(DRAFT_TOKENS) == 396.0
    assert snap.get(ACCEPTED) == 232.0
    assert snap.per_position[ACCEPTED_PER_POS] == {0: 88.0, 1: 72.0, 2: 72.0}
    assert snap.get(GENERATION_TOKENS) == 2048.0
    # request_success is split by finished_reason: stop 0 + length 16 + abort 0 + error 0
    assert snap.get(prom.REQUEST_SUCCESS) == 16.0
    assert not any(name.endswith("_created") for name in snap.counters)
    # a histogram whose name ends in _total is not a counter
    assert "vllm:iteration_tokens_total" not in snap.counters
    assert snap.has_spec_decode and snap.has_engine_stats


def test_sums_over_engines_but_keeps_positions_apart():
    text = page(10, 30, 12, [6, 4, 2], engine="0").replace("# TYPE", "#  TYPE")  # drop TYPE lines
    text2 = page(20, 60, 30, [14, 10, 6], engine="1", created=False).replace("# TYPE", "#  TYPE")
    snap = parse_snapshot(text + text2)
    assert snap.get(DRAFTS) == 30.0
    assert snap.get(ACCEPTED) == 42.0
    assert snap.per_position[ACCEPTED_PER_POS] == {0: 20.0, 1: 14.0, 2: 8.0}


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="Prometheus text format"):
        parse_snapshot('vllm:x_total{engine="0" 1\n')
    with pytest.raises(TypeError, match="str"):
        parse_snapshot(b"vllm:x_total 1")
    with pytest.raises(ValueError, match="position label"):
        parse_snapshot('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="a"} 1\n')


def test_empty_page_is_an_empty_snapshot():
    snap = parse_snapshot("")
    assert snap.counters == {} and not snap.has_engine_stats


# ---------------------------------------------------------------- golden: vLLM's own log lines

LOG_RE = re.compile(
    r"Mean acceptance length: (?P<len>[\d.]+).*Accepted: (?P<acc>\d+) tokens, "
    r"Drafted: (?P<drafted>\d+) tokens, Per-position acceptance rate: (?P<pos>[\d., ]+), "
    r"Avg Draft acceptance rate: (?P<rate>[\d.]+)%"
)
NUM_SPEC_TOKENS = 3  # the captured server ran ngram with num_speculative_tokens=3


def _counter_lines():
    """The real counters printed after the log lines in the capture."""
    lines = [line for line in LOG_EXCERPT.read_text().splitlines() if line.startswith("vllm:")]
    return "\n".join(lines) + "\n"


def _log_windows():
    windows = []
    for line in LOG_EXCERPT.read_text().splitlines():
        m = LOG_RE.search(line)
        if m:
            windows.append(
                {
                    "length": float(m["len"]),
                    "accepted": int(m["acc"]),
                    "drafted": int(m["drafted"]),
                    "per_pos": [float(x) for x in m["pos"].split(",")],
                    "rate": float(m["rate"]) / 100,
                }
            )
    return windows


def test_golden_formulas_reproduce_vllm_specdecoding_log_lines():
    windows = _log_windows()
    assert len(windows) == 2
    real_after = parse_snapshot(_counter_lines())

    # Rebuild the counters at each window boundary from the log (fresh server: all zero
    # before); the last boundary must be exactly the real counters vLLM exposed.
    drafts = tokens = accepted = 0
    pos = [0.0] * NUM_SPEC_TOKENS
    boundaries = [page(0, 0, 0, pos)]
    for w in windows:
        n = w["drafted"] // NUM_SPEC_TOKENS
        drafts, tokens, accepted = drafts + n, tokens + w["drafted"], accepted + w["accepted"]
        pos = [p + round(r * n) for p, r in zip(pos, w["per_pos"])]
        boundaries.append(page(drafts, tokens, accepted, pos))
    rebuilt = parse_snapshot(boundaries[-1])
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        assert rebuilt.get(name) == real_after.get(name)
    assert rebuilt.per_position[ACCEPTED_PER_POS] == real_after.per_position[ACCEPTED_PER_POS]

    # Window 1 from the rebuilt boundary, window 2 ending at the real page.
    edges = [(boundaries[0], boundaries[1]), (boundaries[1], real_after)]
    for (before, after), w in zip(edges, windows):
        stats = spec_decode_delta(before, after)
        assert stats.ok, stats.note
        assert round(stats.acceptance_length, 2) == w["length"]
        assert round(stats.acceptance_rate, 3) == round(w["rate"], 3)
        assert [round(x, 3) for x in stats.per_position] == w["per_pos"]


def test_whole_capture_window_by_hand():
    # 0 -> (6 drafts, 18 draft tokens, 5 accepted, per position 3/1/1)
    before = page(0, 0, 0, [0, 0, 0])
    stats = spec_decode_delta(before, _counter_lines())
    assert stats.ok
    assert stats.acceptance_rate == pytest.approx(5 / 18)
    assert stats.acceptance_length == pytest.approx(1 + 5 / 6)
    assert stats.per_position == pytest.approx([3 / 6, 1 / 6, 1 / 6])
    assert (stats.drafts, stats.draft_tokens, stats.accepted) == (6, 18, 5)


def test_seed_like_figures_from_deltas_not_totals():
    # The server had already served traffic before the window: only deltas count.
    before = page(1000, 3000, 2000, [900, 700, 400], generation=5000)
    after = page(1000 + 500, 3000 + 1500, 2000 + 1005, [900 + 420, 700 + 330, 400 + 255], generation=6500)
    stats = spec_decode_delta(before, after)
    assert stats.acceptance_rate == pytest.approx(1005 / 1500)  # 0.67
    assert stats.acceptance_length == pytest.approx(1 + 1005 / 500)  # 3.01
    assert stats.per_position == pytest.approx([0.84, 0.66, 0.51])


# ---------------------------------------------------------------- the other outcomes


def test_not_a_speculative_server():
    text = '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0"} 10\n'
    stats = spec_decode_delta(text, text)
    assert stats.status == prom.NOT_SPECULATIVE
    assert stats.acceptance_rate is None and "not a speculative" in stats.note


def test_frozen_counters_while_tokens_were_generated_say_so():
    before = page(0, 0, 0, [0, 0, 0], generation=100)
    after = page(0, 0, 0, [0, 0, 0], generation=612)
    stats = spec_decode_delta(before, after)
    assert stats.status == prom.NOT_MOVING
    assert stats.acceptance_rate is None and stats.acceptance_length is None
    assert stats.per_position is None
    assert "512 tokens" in stats.note and "--disable-log-stats" in stats.note


def test_frozen_counters_use_client_token_count_when_page_has_no_generation_counter():
    before = after = page(7, 21, 9, [4, 3, 2])
    stats = spec_decode_delta(before, after, generated_tokens=300)
    assert stats.status == prom.NOT_MOVING and "300 tokens" in stats.note
    assert spec_decode_delta(before, after).status == prom.IDLE


def test_page_without_engine_stats():
    text = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 13.2\n"
    stats = spec_decode_delta(text, text, generated_tokens=50)
    assert stats.status == prom.NO_ENGINE_STATS and stats.acceptance_rate is None


def test_no_snapshots():
    assert spec_decode_delta(None, None).status == prom.NO_METRICS
    assert spec_decode_delta(page(1, 3, 1, [1, 0, 0]), None).status == prom.NO_METRICS


def test_counter_going_backwards_is_a_note_not_a_negative_rate():
    before = page(100, 300, 200, [90, 70, 40], generation=1000)
    after = page(10, 30, 20, [9, 7, 4], generation=100)  # restarted mid-run
    stats = spec_decode_delta(before, after)
    assert stats.status == prom.COUNTER_RESET
    assert stats.acceptance_rate is None
    assert "backwards" in stats.note and DRAFTS in stats.note


def test_full_real_page_from_a_fresh_server():
    # 132 drafts, 396 draft tokens, 232 accepted, per position 88 / 72 / 72; the page's
    # *_created gauges (~1.796e9) must not leak into any figure.
    stats = spec_decode_delta(page(0, 0, 0, [0, 0, 0]), FULL_PAGE.read_text())
    assert stats.ok
    assert stats.acceptance_rate == pytest.approx(232 / 396)
    assert stats.acceptance_length == pytest.approx(1 + 232 / 132)
    assert stats.per_position == pytest.approx([88 / 132, 72 / 132, 72 / 132])


def test_engine_lag_is_the_simulators_lateness_as_a_share_of_step_time_or_none():
    page = (
        "# TYPE llmperf_sim:engine_step_seconds counter\nllmperf_sim:engine_step_seconds_total {}\n"
        "# TYPE llmperf_sim:engine_lag_seconds counter\nllmperf_sim:engine_lag_seconds_total {}\n"
    )
    assert prom.engine_lag_delta(page.format(2.0, 0.5), page.format(12.0, 1.5)) == pytest.approx(0.1)
    assert prom.engine_lag_delta(page.format(2.0, 0.5), page.format(2.0, 0.5)) is None  # nothing ran
    real_vllm = "# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total 5\n"
    assert prom.engine_lag_delta(real_vllm, real_vllm) is None
    assert prom.engine_lag_delta(None, page.format(1.0, 0.0)) is None
