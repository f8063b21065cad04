"""The engine's scheduler, timing and acceptance model, on a virtual clock (no HTTP)."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.sim import SimConfig
from pytest_llmperf.sim.acceptance import extend_rates, scaled_rates
from pytest_llmperf.sim.engine import Engine
from pytest_llmperf.sim.profiles import GENERIC, resolve_profile
from pytest_llmperf.sim.virtual import run_virtual

MTP = {"method": "mtp", "num_speculative_tokens": 3}


def lens(n: int, base: int = 50) -> list[int]:
    return [base + (i * 37) % 200 for i in range(n)]


def test_per_position_survival_within_binomial_bounds():
    config = SimConfig(model="m", speculative_config=MTP, max_num_seqs=16, acceptance_spread=0.0, seed=11)
    r = run_virtual(config, lens(300), concurrency=16, max_tokens=200, ignore_eos=True)
    assert r.drafts > 10_000
    for observed, expected in zip(r.per_position, GENERIC.acceptance):
        sigma = math.sqrt(expected * (1 - expected) / r.drafts)
        assert abs(observed - expected) < 4.5 * sigma, (observed, expected, sigma)
    assert r.draft_tokens == 3 * r.drafts
    assert r.accepted == sum(r.accepted_per_pos) <= r.draft_tokens


def test_tokens_emitted_are_one_plus_accepted_per_step():
    engine = Engine(SimConfig(model="m", speculative_config=MTP, acceptance_spread=0.0))
    req = engine.make_request("r", "p", 10, 1000, True, 0.0)
    engine.add(req)
    now, per_step = 0.0, []
    while engine.has_work:
        step = engine.plan(now)
        now += step.duration
        for em in engine.complete(step, now):
            per_step.append(len(em.pieces))
    assert per_step[0] == 1  # the prefill step samples one token
    assert set(per_step[1:-1]) <= {1, 2, 3, 4}
    assert sum(per_step) == 1000


@pytest.mark.parametrize(
    "model, published",
    [
        ("Qwen/Qwen3.6-35B-A3B-FP8", (0.84, 0.66, 0.51)),
        ("Qwen/Qwen3.6-27B-FP8", (0.86, 0.69, 0.53)),
    ],
)
def test_qwen_profiles_reproduce_published_per_position_acceptance(model, published):
    from pytest_llmperf.sim.calibration import synthetic_prompt_lens

    config = SimConfig(model=model, speculative_config=MTP, max_num_seqs=32, max_model_len=65536)
    r = run_virtual(config, synthetic_prompt_lens(600), concurrency=32, max_tokens=256)
    for observed, expected in zip(r.per_position, published):
        assert abs(observed - expected) <= 0.02, (r.per_position, published)


def test_acceptance_scale_scales_the_rates():
    config = SimConfig(model="m", speculative_config=MTP, acceptance_spread=0.0, acceptance_scale=0.8)
    r = run_virtual(config, lens(200), concurrency=16, max_tokens=200, ignore_eos=True)
    for observed, base in zip(r.per_position, GENERIC.acceptance):
        assert abs(observed - 0.8 * base) < 0.02


def test_rates_extend_and_clamp():
    assert extend_rates((0.8, 0.6, 0.45), 2) == (0.8, 0.6)
    five = extend_rates((0.8, 0.6, 0.45), 5)
    assert five[:3] == (0.8, 0.6, 0.45) and five[3] == pytest.approx(0.45 * 0.75)
    assert scaled_rates((0.9, 0.8), 2.0) == (1.0, 1.0)
    assert all(a >= b for a, b in zip(scaled_rates((0.5, 0.6, 0.2), 1.0), scaled_rates((0.5, 0.6, 0.2), 1.0)[1:]))


def test_requests_beyond_max_num_seqs_queue_and_all_finish():
    engine = Engine(SimConfig(model="m", max_num_seqs=4))
    reqs = [engine.make_request(f"r{i}", f"p{i}", 20, 30, True, 0.0) for i in range(10)]
    for r in reqs:
        engine.add(r)
    now, peak = 0.0, 0
    while engine.has_work:
        step = engine.plan(now)
        peak = max(peak, len(engine.running))
        assert len(engine.waiting) == 10 - sum(r.scheduled_at is not None for r in reqs)
        now += step.duration
        engine.complete(step, now)
    assert peak == 4
    assert all(r.generated == 30 and r.finished_at is not None for r in reqs)
    # Later requests waited for a slot: their first token came after earlier ones finished.
    assert reqs[4].first_token_at > min(r.finished_at for r in reqs[:4]) - 1e-9


def test_a_capped_run_cuts_what_still_runs_its_grace_after_the_cap():
    config = SimConfig(model="m", max_num_seqs=8)
    free = run_virtual(config, lens(40), concurrency=4, max_tokens=400, ignore_eos=True, max_seconds=2.0)
    # With no grace every request sent before the cap finishes, long after it.
    assert free.duration > 2.5 and not free.cut_spans
    cut = run_virtual(
        config, lens(40), concurrency=4, max_tokens=400, ignore_eos=True, max_seconds=2.0, grace_seconds=0.5
    )
    assert cut.duration == pytest.approx(2.5)
    # The same requests were sent; those not done by 2.5 s are cut, with the tokens they streamed.
    assert cut.completed + len(cut.cut_spans) == len(free.spans) and cut.cut_spans
    assert all(end <= 2.5 for _, end, _, _ in cut.spans + cut.cut_spans)
    assert all(0 < tokens < 400 and len(chunks) == tokens for _, _, chunks, tokens in cut.cut_spans)
    assert [s for s in free.spans if s[1] <= 2.5] == cut.spans  # what finished in time, unchanged


def test_decode_step_grows_with_batch_and_prefill():
    engine = Engine(SimConfig(model="m", max_num_seqs=64))
    p = GENERIC
    for n in (1, 8, 32):
        e = Engine(SimConfig(model="m", max_num_seqs=64))
        for i in range(n):
            r = e.make_request(f"r{i}", f"p{i}", 10, 50, True, 0.0)
            e.add(r)
        first = e.plan(0.0)
        assert first.duration == pytest.approx(p.step_base_s + p.prefill_per_token_s * 10 * n)
        e.complete(first, first.duration)
        decode = e.plan(first.duration)
        assert decode.duration == pytest.approx(p.step_base_s + p.per_token_s * n)
    del engine


def test_speed_divides_time_and_keeps_ratios():
    def run(speed: float, spec):
        c = SimConfig(
            model="Qwen/Qwen3.6-27B-FP8", speculative_config=spec, max_num_seqs=8, speed=speed, max_model_len=65536
        )
        return run_virtual(c, lens(40), concurrency=8, max_tokens=128)

    slow, fast = run(1.0, MTP), run(25.0, MTP)
    assert fast.duration == pytest.approx(slow.duration / 25)
    assert fast.output_tokens == slow.output_tokens
    assert fast.per_position == slow.per_position
    speedup_slow = slow.decode_tok_s / run(1.0, None).decode_tok_s
    speedup_fast = fast.decode_tok_s / run(25.0, None).decode_tok_s
    assert speedup_fast == pytest.approx(speedup_slow)


def test_step_time_scale_slows_decoding():
    base = SimConfig(model="m", max_num_seqs=8)
    a = run_virtual(base, lens(40), concurrency=8, max_tokens=64, ignore_eos=True)
    b = run_virtual(base.with_(step_time_scale=1.5), lens(40), concurrency=8, max_tokens=64, ignore_eos=True)
    assert b.decode_tok_s == pytest.approx(a.decode_tok_s / 1.5)


def test_output_length_derives_from_the_prompt_and_seed():
    engine = Engine(SimConfig(model="m", seed=1))
    a = engine.make_request("a", "same prompt", 5, 10_000, False, 0.0)
    b = engine.make_request("b", "same prompt", 5, 10_000, False, 0.0)
    c = engine.make_request("c", "same prompt", 5, 10_000, True, 0.0)
    other_seed = Engine(SimConfig(model="m", seed=2)).make_request("d", "same prompt", 5, 10_000, False, 0.0)
    assert a.target_len == b.target_len and a.finish_reason == "stop"
    assert c.target_len == 10_000 and c.finish_reason == "length"
    assert other_seed.target_len != a.target_len
    lengths = {engine.make_request(str(i), f"prompt {i}", 5, 10_000, False, 0.0).target_len for i in range(50)}
    assert len(lengths) > 40


def test_eos_only_rate_answers_that_share_with_one_eos_token_per_prompt():
    plain = Engine(SimConfig(model="m", seed=1))
    knob = Engine(SimConfig(model="m", seed=1, eos_only_rate=0.3))
    prompts = [f"prompt {i}" for i in range(1000)]
    before = [plain.make_request(p, p, 5, 10_000, False, 0.0) for p in prompts]
    after = [knob.make_request(p, p, 5, 10_000, False, 0.0) for p in prompts]
    eos_only = [a for a in after if (a.target_len, a.finish_reason) == (1, "stop")]
    assert 240 <= len(eos_only) <= 360  # 0.3 of 1000, within 4 binomial sd (14.5)
    # the others keep the length and text they had without the knob
    kept = [(b, a) for b, a in zip(before, after) if a not in eos_only]
    assert all((a.target_len, a.finish_reason) == (b.target_len, b.finish_reason) for b, a in kept)
    assert all(a.text.next_piece() == b.text.next_piece() for b, a in kept)
    # greedy: the same prompt is EOS-only every time; ignore_eos never stops at once
    again = [knob.make_request(p, p, 5, 10_000, False, 0.0).target_len for p in prompts]
    assert again == [a.target_len for a in after]
    forced = [knob.make_request(p, p, 5, 64, True, 0.0) for p in prompts[:100]]
    assert all((f.target_len, f.finish_reason) == (64, "length") for f in forced)


def _texts(request, n=6):
    return [request.text.next_piece() for _ in range(n)]


def test_early_stop_rate_ends_that_share_at_half_its_length_with_eos_the_same_way_every_time():
    prompts = [f"prompt {i}" for i in range(1000)]
    plain = [Engine(SimConfig(model="m", seed=1)).make_request(p, p, 5, 10_000, False, 0.0) for p in prompts]
    knob = Engine(SimConfig(model="m", seed=1, early_stop_rate=0.3))
    after = [knob.make_request(p, p, 5, 10_000, False, 0.0) for p in prompts]
    early = [(b, a) for b, a in zip(plain, after) if a.target_len != b.target_len]
    assert 240 <= len(early) <= 360  # 0.3 of the 1000 (those of length 1 cannot stop earlier)
    assert all(a.target_len == max(1, b.target_len // 2) and a.finish_reason == "stop" for b, a in early)
    assert all(_texts(a) == _texts(b) for b, a in zip(plain, after))  # text as before, only shorter
    again = [knob.make_request(p, p, 5, 10_000, False, 0.0).target_len for p in prompts]  # greedy: the same
    assert again == [a.target_len for a in after]
    forced = [knob.make_request(p, p, 5, 64, True, 0.0) for p in prompts[:100]]
    assert all((f.target_len, f.finish_reason) == (64, "length") for f in forced)


def test_changed_output_rate_changes_that_share_of_texts_and_nothing_else():
    prompts = [f"prompt {i}" for i in range(400)]
    plain = [Engine(SimConfig(model="m", seed=1)).make_request(p, p, 5, 256, False, 0.0) for p in prompts]
    knob = Engine(SimConfig(model="m", seed=1, changed_output_rate=0.25))
    after = [knob.make_request(p, p, 5, 256, False, 0.0) for p in prompts]
    assert all((a.target_len, a.finish_reason) == (b.target_len, b.finish_reason) for b, a in zip(plain, after))
    changed = sum(_texts(a, 12) != _texts(b, 12) for b, a in zip(plain, after))
    assert 70 <= changed <= 130  # 0.25 of 400, within 4 binomial sd (8.7)
    # greedy: the same prompt gives the same (changed) text every time
    first = Engine(SimConfig(model="m", seed=1, changed_output_rate=0.25)).make_request("a", "q", 5, 256, False, 0.0)
    second = knob.make_request("b", "q", 5, 256, False, 0.0)
    assert _texts(first, 12) == _texts(second, 12)


def test_eos_only_reply_is_one_empty_piece_in_the_prefill_step():
    engine = Engine(SimConfig(model="m", eos_only_rate=1.0))
    req = engine.make_request("r", "p", 10, 256, False, 0.0)
    engine.add(req)
    step = engine.plan(0.0)
    assert step is not None
    (em,) = engine.complete(step, step.duration)
    assert (em.pieces, em.finished, req.generated, req.finish_reason) == ([""], True, 1, "stop")


def test_runs_are_reproducible():
    config = SimConfig(model="m", speculative_config=MTP, max_num_seqs=8, seed=5)
    a = run_virtual(config, lens(50), concurrency=8, max_tokens=100)
    b = run_virtual(config, lens(50), concurrency=8, max_tokens=100)
    c = run_virtual(config.with_(seed=6), lens(50), concurrency=8, max_tokens=100)
    assert (a.duration, a.accepted_per_pos, a.output_tokens) == (b.duration, b.accepted_per_pos, b.output_tokens)
    assert a.accepted_per_pos != c.accepted_per_pos


def test_profiles_resolve_from_model_names():
    assert resolve_profile("Qwen/Qwen3.6-27B-FP8").name == "qwen3.6-27b-fp8"
    assert resolve_profile("qwen3.6-27b").name == "qwen3.6-27b-fp8"
    assert resolve_profile("Qwen/Qwen3.6-35B-A3B-FP8").name == "qwen3.6-35b-a3b-fp8"
    assert resolve_profile("Qwen/Qwen3.6-35B-A3B").name == "qwen3.6-35b-a3b-fp8"
    assert resolve_profile("some/other-model").name == "generic"


def test_profiles_land_within_ten_percent_of_every_seed_figure():
    """The fitted profiles against the published figures, on a virtual clock (no timing)."""
    from pytest_llmperf.sim.calibration import (
        SEED_TARGETS,
        metric_value,
        simulate_target,
        synthetic_prompt_lens,
    )

    lens = synthetic_prompt_lens(1000)
    runs: dict[tuple, object] = {}
    for t in SEED_TARGETS:
        key = (t.model, t.speculative, t.concurrency)
        if key not in runs:
            runs[key] = simulate_target(t, lens)
        ratio = metric_value(runs[key], t.metric) / t.published
        assert 0.9 <= ratio <= 1.1, f"{t.label} {t.metric}: {ratio:.3f} of the published {t.published}"


def test_run_noise_draws_one_factor_per_server_start_seeded():
    quiet = Engine(SimConfig(model="Qwen/Qwen3.6-27B-FP8"))
    assert quiet.run_factors == (1.0, 1.0)
    cfg = SimConfig(
        model="Qwen/Qwen3.6-27B-FP8", speculative_config=MTP, run_noise=0.05, acceptance_noise=0.02, noise_seed=7
    )
    a, b = Engine(cfg), Engine(cfg)
    assert a.run_factors == b.run_factors != (1.0, 1.0)  # same seed, same start
    other = Engine(cfg.with_(noise_seed=8))
    assert other.run_factors != a.run_factors
    unseeded = {Engine(cfg.with_(noise_seed=None)).run_factors for _ in range(5)}
    assert len(unseeded) == 5  # every start its own draw
    factors = [Engine(cfg.with_(noise_seed=s)).run_factors[0] for s in range(400)]
    rms = (sum(math.log(f) ** 2 for f in factors) / len(factors)) ** 0.5
    assert rms == pytest.approx(0.05, rel=0.2)


def test_run_noise_moves_the_whole_runs_speed():
    cfg = SimConfig(model="Qwen/Qwen3.6-27B-FP8", max_num_seqs=8, run_noise=0.05, noise_seed=3)
    factor = Engine(cfg).run_factors[0]
    slow = run_virtual(cfg, lens(16), 8, 64)
    plain = run_virtual(cfg.with_(run_noise=0.0), lens(16), 8, 64)
    assert slow.duration / plain.duration == pytest.approx(factor, rel=1e-6)


def test_run_noise_flags_are_validated_and_parsed():
    cfg = SimConfig.from_vllm_argv(
        ["m", "--sim-run-noise", "0.02", "--sim-acceptance-noise", "0.01", "--sim-noise-seed", "5"]
    )
    assert (cfg.run_noise, cfg.acceptance_noise, cfg.noise_seed) == (0.02, 0.01, 5)
    assert SimConfig.from_vllm_argv(cfg.to_vllm_argv()).run_noise == 0.02
    with pytest.raises(ValueError, match="run_noise"):
        SimConfig(model="m", run_noise=2.0)


def test_reasoning_labels_tokens_and_keeps_every_length_and_draw():
    # --reasoning-parser qwen3: the same replies, of the same lengths and text; only the
    # first reasoning_share of each natural length is reasoning. Qwen3.6 at the seeds'
    # max_tokens 256: most replies never leave their reasoning (DESIGN.md's calibration).
    model = "Qwen/Qwen3.6-35B-A3B-FP8"
    plain = Engine(SimConfig(model=model, seed=1))
    think = Engine(SimConfig(model=model, seed=1, reasoning_parser="qwen3"))
    prompts = [f"prompt {i}" for i in range(1000)]
    before = [plain.make_request(p, p, 5, 256, False, 0.0, reasoning=True) for p in prompts]
    after = [think.make_request(p, p, 5, 256, False, 0.0, reasoning=True) for p in prompts]
    assert all(b.reasoning_len is None for b in before)  # no parser: no reasoning phase
    assert [(a.target_len, a.finish_reason) for a in after] == [(b.target_len, b.finish_reason) for b in before]
    assert all(a.text.next_piece() == b.text.next_piece() for b, a in zip(before, after))
    never_answer = sum(a.reasoning_len >= a.target_len for a in after)
    assert 850 <= never_answer <= 980, never_answer
    answered = [a for a in after if a.reasoning_len < a.target_len]
    # a reply that stops naturally has reasoning, </think>, a blank line, an answer token and EOS
    assert all(a.reasoning_len <= a.target_len - 4 for a in answered if a.finish_reason == "stop")
    # a chat request only: completions never reason
    assert think.make_request("c", "prompt 1", 5, 256, False, 0.0).reasoning_len is None


def test_reasoning_share_and_eos_only_replies():
    engine = Engine(SimConfig(model="m", seed=1, reasoning_parser="qwen3", reasoning_share=0.5))
    reqs = [engine.make_request(str(i), f"prompt {i}", 5, 100_000, False, 0.0, reasoning=True) for i in range(200)]
    for r in reqs:
        assert r.reasoning_len == (max(0, min(int(0.5 * r.target_len), r.target_len - 4)))
    none = Engine(SimConfig(model="m", reasoning_parser="qwen3", reasoning_share=0.0))
    assert none.make_request("n", "p", 5, 256, False, 0.0, reasoning=True).reasoning_len == 0  # answers at once
    eos = Engine(SimConfig(model="m", eos_only_rate=1.0, reasoning_parser="qwen3"))
    req = eos.make_request("e", "p", 5, 256, False, 0.0, reasoning=True)
    assert (req.target_len, req.reasoning_len) == (1, 0)  # one EOS token, no reasoning
