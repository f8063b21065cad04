"""The marker's dataset keys: resolved per test, checked at collection, keyed in baselines."""

from __future__ import annotations

import pytest

from pytest_llmperf.baselines.store import workload_key
from pytest_llmperf.workload.workload import check_workload, resolve_workload


def test_sharegpt_workloads_keep_the_keys_baselines_were_recorded_under():
    """Committed baselines of ShareGPT runs must still find their entries."""
    workload = resolve_workload(dict(num_prompts=16, max_seconds=60, max_tokens=256), 2, warmup=2)
    assert workload.dataset_name == "sharegpt" and not workload.per_request_max_tokens
    assert workload_key(workload.to_dict()) == (
        "endpoint=completions ignore_eos=false max_seconds=60 max_tokens=256 num_prompts=16 profile=full seed=0 "
        "warmup=2"
    )
    assert workload.run_config().max_tokens == 256


def test_random_takes_vllms_defaults_ignore_eos_and_its_output_length_as_max_tokens():
    workload = resolve_workload(dict(dataset_name="random", num_prompts=8), 2)
    assert (workload.random_input_len, workload.random_range_ratio, workload.random_prefix_len) == (1024, 0.0, 0)
    assert workload.max_tokens == 256 and workload.ignore_eos  # vllm bench serve turns ignore_eos on for random
    assert resolve_workload(dict(dataset_name="random", ignore_eos=False), 2).ignore_eos is False
    assert resolve_workload(dict(dataset_name="random", random_output_len=64), 2).max_tokens == 64
    assert resolve_workload(dict(dataset_name="random", random_output_len=64, max_tokens=64), 2).max_tokens == 64
    # Each request's own sampled length is sent: the runner's max_tokens is None.
    assert workload.per_request_max_tokens and workload.run_config().max_tokens is None
    assert workload.run_config().ignore_eos


def test_random_and_custom_workloads_have_keys_of_their_own():
    random = resolve_workload(
        dict(dataset_name="random", random_input_len=512, random_range_ratio=0.25, random_prefix_len=32), 2, warmup=2
    )
    assert workload_key(random.to_dict()) == (
        "dataset_name=random endpoint=completions ignore_eos=true max_seconds=null max_tokens=256 num_prompts=200 "
        "profile=full random_input_len=512 random_prefix_len=32 random_range_ratio=0.25 seed=0 warmup=2"
    )
    custom = resolve_workload(dict(dataset_name="custom", dataset_path="/data/prompts/short.jsonl"), 2, warmup=2)
    key = workload_key(custom.to_dict())
    # The file's name, never the machine's path to it (baselines are committed).
    assert "dataset_file=short.jsonl" in key and "dataset_name=custom" in key and "/data" not in key
    sharegpt = resolve_workload({}, 2, warmup=2)
    assert len({workload_key(w.to_dict()) for w in (random, custom, sharegpt)}) == 3
    other_random = resolve_workload(dict(dataset_name="random", random_input_len=256), 2, warmup=2)
    assert workload_key(other_random.to_dict()) != workload_key(random.to_dict())


def test_the_options_dataset_is_the_default_and_the_marker_wins():
    default = ("random", None)
    assert resolve_workload({}, 2, dataset=default).dataset_name == "random"
    assert resolve_workload(dict(dataset_name="sharegpt"), 2, dataset=default).dataset_name == "sharegpt"
    # --llmperf-dataset is the custom dataset's file when --llmperf-dataset-name is custom.
    custom = resolve_workload({}, 2, dataset=("custom", "p.jsonl"))
    assert custom.dataset_name == "custom" and custom.dataset_path is None  # the session reads the option's
    assert resolve_workload(dict(dataset_name="custom", dataset_path="q.jsonl"), 2).dataset_path == "q.jsonl"


@pytest.mark.parametrize(
    "declared, default, message",
    [
        (
            dict(random_input_len=128),
            ("sharegpt", None),
            "llmperf marker: random_input_len apply to dataset_name='random' only (this test's dataset is 'sharegpt'); "
            "add dataset_name='random', or remove them",
        ),
        (
            dict(dataset_name="custom", random_prefix_len=4, random_range_ratio=0.1),
            ("sharegpt", None),
            "llmperf marker: random_range_ratio, random_prefix_len apply to dataset_name='random' only",
        ),
        (
            dict(dataset_name="random", dataset_path="x.json"),
            ("sharegpt", None),
            "llmperf marker: dataset_path does not apply to dataset_name='random' (its prompts are generated); "
            "remove it",
        ),
        (
            dict(dataset_name="random", random_output_len=64, max_tokens=128),
            ("sharegpt", None),
            "llmperf marker: random_output_len=64 and max_tokens=128 differ; the random dataset's output length is "
            "max_tokens: give one of them",
        ),
        (
            dict(dataset_name="custom"),
            ("sharegpt", "sharegpt.json"),
            "llmperf marker: dataset_name='custom' needs its JSONL file: dataset_path='prompts.jsonl' in the marker, "
            "or --llmperf-dataset-name custom with --llmperf-dataset FILE",
        ),
        (
            dict(dataset_name="random", random_input_len=0),
            ("sharegpt", None),
            "random_input_len=0 is too small: with 0 special token(s) and range ratio 0 a prompt could have 0 "
            "tokens; raise random_input_len or random_prefix_len, or lower random_range_ratio",
        ),
    ],
)
def test_dataset_keys_that_do_not_fit_together_are_refused_with_the_fix(declared, default, message):
    with pytest.raises(ValueError) as exc:
        resolve_workload(declared, 2, dataset=default)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    "declared, message",
    [
        (
            dict(dataset_name="hf"),
            "llmperf marker: dataset_name='hf': dataset_name (the dataset, as vllm bench serve --dataset-name) takes "
            "'sharegpt' or 'random' or 'custom'",
        ),
        (dict(dataset_path=""), "dataset_path (the dataset's file (ShareGPT JSON, or custom JSONL)) takes a file path"),
        (dict(dataset_path=3), "dataset_path=3: dataset_path"),
        (dict(random_input_len=-1), "random_input_len=-1: random_input_len (the random dataset's prompt tokens) takes"),
        (dict(random_output_len=0), "random_output_len=0: random_output_len"),
        (dict(random_range_ratio=1), "random_range_ratio (the random dataset's spread of lengths) takes a number in"),
        (dict(random_range_ratio={8: 0.5, 1: "x"}), "the value for concurrency 1: random_range_ratio"),
        (dict(random_prefix_len=2.0), "random_prefix_len=2.0: random_prefix_len"),
    ],
)
def test_each_dataset_key_is_checked_without_coercion(declared, message):
    with pytest.raises(ValueError) as exc:
        check_workload(declared)
    assert message in str(exc.value)


def test_random_settings_may_differ_per_concurrency():
    declared = dict(dataset_name="random", random_input_len={1: 4096, "default": 1024})
    assert resolve_workload(declared, 1).random_input_len == 4096
    assert resolve_workload(declared, 8).random_input_len == 1024
