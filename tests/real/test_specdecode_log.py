"""The SpecDecoding log-line reader the real-engine tests rely on (fast; no engine)."""

from __future__ import annotations

from pathlib import Path

import pytest
from specdecode_log import LogWindow, UnexplainedLine, parse_lines, totals

CAPTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "reference" / "vllm-0.32-cpu-api-capture.txt"

# Lines a real vLLM 0.32 CPU server printed in this project (ngram, k=3).
REAL = [
    "(APIServer pid=4060) INFO 11-30 04:37:58 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 3.60, "
    "Accepted throughput: 12.98 tokens/s, Drafted throughput: 12.98 tokens/s, Accepted: 13 tokens, Drafted: 13 tokens, "
    "Per-position acceptance rate: 1.000, 0.800, 0.800, Avg Draft acceptance rate: 100.0%",
    "(APIServer pid=4060) INFO 11-30 04:38:03 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 1.43, "
    "Accepted throughput: 3.00 tokens/s, Drafted throughput: 20.99 tokens/s, Accepted: 3 tokens, Drafted: 21 tokens, "
    "Per-position acceptance rate: 0.143, 0.143, 0.143, Avg Draft acceptance rate: 14.3%",
]


def test_reference_capture_lines_add_up_to_its_counters():
    lines = CAPTURE.read_text().splitlines()
    windows = parse_lines(lines)
    assert len(windows) == 2
    t = totals(windows)
    # The capture's counters after these windows: 6 drafts, 18 draft tokens, 5 accepted, 3/1/1.
    assert (t.accepted, t.drafted, t.accepted_per_pos) == (5, 18, (3, 1, 1))
    assert t.drafts_min <= 6 <= t.drafts_max


def test_a_short_last_draft_is_explained_by_the_length_not_drafted_over_k():
    w = parse_lines(REAL[:1])[0]
    # 13 draft tokens in 5 drafts: one draft was cut short, so drafted/k would be wrong.
    assert w.explanations() == [(5, (5, 4, 4))]
    w2 = parse_lines(REAL[1:])[0]
    assert w2.explanations() == [(7, (1, 1, 1))]
    t = totals([w, w2])
    assert (t.drafts_min, t.drafts_max, t.accepted_per_pos) == (12, 12, (6, 5, 5))


def test_a_line_no_count_can_print_is_refused():
    forged = LogWindow(length="2.50", accepted=5, drafted=15, rates=("0.600", "0.200", "0.200"), rate="33.3")
    with pytest.raises(UnexplainedLine):
        totals([forged])


def test_no_lines_is_an_error_not_zero():
    with pytest.raises(ValueError, match="no SpecDecoding lines"):
        totals(parse_lines(["INFO nothing to see"]))
