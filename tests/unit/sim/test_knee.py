"""The engine's knee on the virtual clock: TTFT rises with load (prefill contention, then
the queue past --max-num-seqs), and the scheduler knobs --sim-max-prefill-seqs and
--sim-prefill-budget move it while decoding at low load stays where it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_llmperf.metrics.steady import steady_tok_s
from pytest_llmperf.sim import SimConfig
from pytest_llmperf.sim.calibration import MTP3, synthetic_prompt_lens
from pytest_llmperf.sim.virtual import VirtualResult, run_virtual

# The seed suite's 27B MTP server (conftest.py): --max-num-seqs 32.
SEED_27B_MTP = ["Qwen/Qwen3.6-27B-FP8", "--max-num-seqs", "32", "--speculative-config", json.dumps(MTP3)]


def closed_loop(config: SimConfig, concurrency: int, prompts: int) -> VirtualResult:
    return run_virtual(config, synthetic_prompt_lens(prompts), concurrency, 256, num_prompts=prompts)


def ttft_p99(r: VirtualResult) -> float:
    return float(np.percentile(r.ttfts, 99))


def test_ttft_rises_with_load_and_past_max_num_seqs_requests_queue():
    config = SimConfig.from_vllm_argv(SEED_27B_MTP)
    p99 = {c: ttft_p99(closed_loop(config, c, max(64, 4 * c))) for c in (1, 8, 32, 64)}
    assert p99[1] < p99[8] < p99[32] < p99[64]
    assert p99[32] > 3 * p99[1]  # prefill contention below the slots
    assert p99[64] > 4 * p99[32]  # and the queue for a slot past them


def test_max_prefill_seqs_moves_the_knee_and_leaves_decoding_at_low_load_where_it_was():
    default = SimConfig.from_vllm_argv(SEED_27B_MTP)
    knob = SimConfig.from_vllm_argv([*SEED_27B_MTP, "--sim-max-prefill-seqs", "1"])
    assert knob.max_prefill_seqs == 1 and default.max_prefill_seqs is None
    lone_default, lone_knob = closed_loop(default, 1, 24), closed_loop(knob, 1, 24)
    assert lone_knob.ttfts == lone_default.ttfts and lone_knob.tpots == lone_default.tpots  # one prompt at a time
    for c in (1, 8):
        old, new = closed_loop(default, c, 64), closed_loop(knob, c, 64)
        assert steady_tok_s(new.spans, c) == pytest.approx(steady_tok_s(old.spans, c), rel=0.01)
        assert new.tpot_median == pytest.approx(old.tpot_median, rel=0.01)
    # The 32 prompts that open the run arrive together (a quarter of its 128): they wait their turn.
    loaded_default, loaded_knob = closed_loop(default, 32, 128), closed_loop(knob, 32, 128)
    assert ttft_p99(loaded_knob) > 1.5 * ttft_p99(loaded_default)
    assert loaded_knob.tpot_median == pytest.approx(loaded_default.tpot_median, rel=0.02)


def test_prefill_budget_chunks_a_prompt_over_steps():
    config = SimConfig(model="m", max_num_seqs=4)
    whole = run_virtual(config, [1000], 1, 4)
    chunked = run_virtual(config.with_(prefill_budget=256), [1000], 1, 4)
    assert chunked.tpots == pytest.approx(whole.tpots)  # decoding is the same
    # four steps of 256, 256, 256 and 232 prompt tokens, each with its fixed cost, against one
    step_base_s = config.resolved_profile.step_base_s
    assert chunked.ttfts[0] - whole.ttfts[0] == pytest.approx(3 * step_base_s)


@pytest.mark.parametrize("flag", ["--sim-max-prefill-seqs", "--sim-prefill-budget"])
def test_the_knobs_round_trip_and_refuse_what_is_not_a_positive_count(flag):
    config = SimConfig.from_vllm_argv(["m", flag, "3"])
    assert SimConfig.from_vllm_argv(config.to_vllm_argv()) == config
    with pytest.raises(ValueError, match="must be >= 1"):
        SimConfig.from_vllm_argv(["m", flag, "0"])
    with pytest.raises(ValueError, match=f"{flag} expects a int, got '1.5'"):
        SimConfig.from_vllm_argv(["m", flag, "1.5"])
