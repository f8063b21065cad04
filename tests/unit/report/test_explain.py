"""What changed since the baseline, and why decode moved: each regression knob of the
simulator alone (on its virtual clock) is attributed to its own cause."""

import statistics

import pytest

from pytest_llmperf.report.explain import decode_attribution, explanation, format_changes, provenance_changes
from pytest_llmperf.sim.calibration import MTP3, synthetic_prompt_lens
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.virtual import run_virtual

BASELINE = {
    "date": "2026-12-01T09:11:44+00:00",
    "image": "vllm/vllm-openai:cu130-nightly",
    "image_digest": "sha256:aaa",
    "vllm_version": "0.32.0",
    "gpu_name": "NVIDIA H200",
    "gpu_driver": "570.1",
    "plugin_version": "0.1.0",
    "git_commit": "5545e68",
    "peak_gpu_memory_mib": 100,
    "server": {"name": "m", "image": "vllm/vllm-openai:cu130-nightly", "args": ["--max-num-seqs", "32"]},
    "dataset": {"sha256": "99af0276a84059eca228", "path": "a.json", "records": 10},
}


def test_one_difference_reads_nothing_but_it():
    tonight = {**BASELINE, "vllm_version": "0.33.0", "date": "2026-12-02T01:00:00+00:00", "peak_gpu_memory_mib": 120}
    changes = provenance_changes(BASELINE, tonight)
    assert [c.describe() for c in changes] == ["vLLM version: 0.32.0 -> 0.33.0"]
    assert format_changes(changes, "2026-12-01") == [
        "what changed since the baseline (recorded 2026-12-01): nothing but the vLLM version: 0.32.0 -> 0.33.0"
    ]


def test_several_differences_are_listed_in_reading_order_and_one_side_only_counts():
    tonight = {
        **BASELINE,
        "image_digest": "sha256:bbb",
        "git_commit": "abc1234",
        "server": {**BASELINE["server"], "args": ["--max-num-seqs", "64"]},
        "dataset": {**BASELINE["dataset"], "sha256": "0123456789abcdef", "path": "b.json"},
        "sim_args": ["--sim-step-time-scale", "1.1"],
    }
    lines = format_changes(provenance_changes(BASELINE, tonight))
    assert lines == [
        "what changed since the baseline:",
        "  - image digest: sha256:aaa -> sha256:bbb",
        "  - server args: --max-num-seqs 32 -> --max-num-seqs 64",
        "  - simulator args: (not recorded) -> --sim-step-time-scale 1.1",
        "  - dataset sha256: 99af0276a840 -> 0123456789ab",
        "  - git commit: 5545e68 -> abc1234",
    ]


def test_no_difference_says_the_change_is_in_the_run():
    (line,) = format_changes(provenance_changes(BASELINE, {**BASELINE, "date": "later"}))
    assert "nothing its provenance records" in line


def test_a_capacity_searchs_probes_are_its_figures_not_a_provenance_change():
    probes = [{"load": 8, "outcome": "met", "runs": 1, "values_ms": {"ttft_ms_p90": 900.0}}]
    assert provenance_changes({**BASELINE, "capacity_probes": probes}, {**BASELINE, "capacity_probes": []}) == []


def test_the_attribution_is_an_exact_split_that_multiplies_to_the_total():
    baseline = {"decode_tok_s": 400.0, "acceptance_length": 3.0, "tpot_ms_mean": 25.0}
    # 14 % fewer tokens per step, steps 1.1 % faster, same streams decoding:
    length, step = 3.0 * 0.86, 75.0 / 1.011
    tpot = step / length
    measured = {"decode_tok_s": 400.0 * 0.86 * 1.011, "acceptance_length": length, "tpot_ms_mean": tpot}
    a = decode_attribution(baseline, measured)
    assert a.acceptance_length == pytest.approx(-0.14)
    assert a.step_time == pytest.approx(0.011)
    assert a.occupancy == pytest.approx(0.0, abs=1e-12)
    assert (1 + a.acceptance_length) * (1 + a.step_time) * (1 + a.occupancy) == pytest.approx(1 + a.decode)
    assert a.describe() == "-13.1% decode: -14.0% from acceptance length, +1.1% from step time"


def test_no_attribution_without_acceptance_or_tpot():
    assert decode_attribution({"decode_tok_s": 1.0}, {"decode_tok_s": 2.0}) is None
    lines, changes, attribution = explanation(BASELINE, BASELINE, {}, {}, speculative=True)
    assert attribution is None and changes == [] and len(lines) == 1


LENS = synthetic_prompt_lens(300)


def figures(concurrency, **knobs):
    config = SimConfig(
        model="Qwen/Qwen3.6-27B-FP8",
        max_num_seqs=32,
        max_model_len=65536,
        speculative_config=dict(MTP3),
        **knobs,
    )
    r = run_virtual(config, LENS, concurrency, 256, num_prompts=max(8 * concurrency, 16))
    return {
        "decode_tok_s": r.decode_tok_s,
        "tpot_ms_mean": statistics.fmean(r.tpots) * 1000,
        "acceptance_length": 1 + r.accepted / r.drafts,
    }


# Each knob alone moves decode by about 9-11 %; the other cause is given at most this
# share of decode (percentage points), and its own cause the change within it. Observed
# on the virtual clock: at most 1.6 points (at concurrency 32 fewer tokens per step make
# the steps that carry a prefill a smaller share, so steps get a little faster).
MARGIN = 0.025


@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_lower_acceptance_alone_is_attributed_to_acceptance_length(concurrency):
    a = decode_attribution(figures(concurrency), figures(concurrency, acceptance_scale=0.85))
    assert a.decode < -0.05
    assert a.acceptance_length == pytest.approx(a.decode, abs=MARGIN)
    assert abs(a.step_time) < MARGIN


@pytest.mark.parametrize("concurrency", [1, 8, 32])
def test_slower_steps_alone_are_attributed_to_step_time(concurrency):
    a = decode_attribution(figures(concurrency), figures(concurrency, step_time_scale=1.1))
    assert a.decode == pytest.approx(1 / 1.1 - 1, abs=0.005)
    assert a.step_time == pytest.approx(1 / 1.1 - 1, abs=MARGIN)
    assert abs(a.acceptance_length) < MARGIN
    assert "from step time" in a.describe()


def test_another_slot_of_the_same_gpu_model_is_no_change():
    """Baselines stay per GPU model: which GPUs ran tonight's run (--llmperf-gpus) is not a
    difference, so any slot can gate against them; nor is the Docker engine an older
    baseline names (recorded when one session drove several)."""
    tonight = {**BASELINE, "gpu_ids": ["3"]}
    assert provenance_changes(BASELINE, tonight) == []
    assert provenance_changes({**BASELINE, "gpu_ids": ["0"], "docker_host": "ssh://gpu-b"}, tonight) == []
