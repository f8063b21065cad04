"""Whether two runs are comparable, and the refusal's text (baselines/comparable.py)."""

from pytest_llmperf.baselines.comparable import check_compatible, incompatibility_message

WORKLOAD = {
    "dataset": "ShareGPT_V3",
    "dataset_sha256": "ab12",
    "seed": 0,
    "num_prompts": 500,
    "max_tokens": 256,
    "max_seconds": 300,
}
HW = {"gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "570.1", "vllm_version": "0.32.0"}


def test_identical_setups_are_compatible():
    assert check_compatible(WORKLOAD, dict(WORKLOAD), HW, dict(HW)) == []


def test_numbers_compare_by_value_not_type():
    assert check_compatible({"max_seconds": 300}, {"max_seconds": 300.0}, {}, {}) == []


def test_every_difference_is_listed():
    measured = dict(WORKLOAD, max_tokens=128, seed=1)
    hw = dict(HW, gpu_name="NVIDIA A100", gpu_count=2)
    diffs = check_compatible(WORKLOAD, measured, HW, hw)
    assert "max_tokens: baseline 256, measured 128" in diffs
    assert "seed: baseline 0, measured 1" in diffs
    assert "gpu_name: baseline NVIDIA H200, measured NVIDIA A100" in diffs
    assert "gpu_count: baseline 1, measured 2" in diffs
    assert len(diffs) == 4


def test_key_on_one_side_only_is_a_difference():
    diffs = check_compatible(WORKLOAD, {k: v for k, v in WORKLOAD.items() if k != "dataset_sha256"}, HW, HW)
    assert diffs == ["dataset_sha256: baseline ab12, measured (absent)"]


def test_vllm_version_and_driver_do_not_refuse():
    # A new nightly image is what the suite judges; it must be compared, not refused.
    assert check_compatible(WORKLOAD, WORKLOAD, HW, dict(HW, vllm_version="0.33.0", driver="575.0")) == []


def test_incompatibility_message_lists_differences_and_fix():
    msg = incompatibility_message(
        "baselines/sim/x.json", 32, ["max_tokens: baseline 256, measured 128"], "pytest t.py --update-baselines"
    )
    assert "baselines/sim/x.json" in msg and "concurrency 32" in msg
    assert "  - max_tokens: baseline 256, measured 128" in msg
    assert "pytest t.py --update-baselines" in msg
