"""sample_requests: vLLM's ShareGPT sampling semantics, determinism, bad arguments."""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

import pytest

from pytest_llmperf.workload.dataset import (
    Conversation,
    DatasetError,
    NotEnoughPromptsError,
    load_sharegpt,
    sample_requests,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sharegpt"


def words(texts: list[str]) -> list[int]:
    """A test tokenizer: one token per whitespace-separated word."""
    return [len(t.split()) for t in texts]


def conv(i: int, prompt_words: int, completion_words: int) -> Conversation:
    return Conversation(
        index=i,
        id=f"c{i}",
        prompt=" ".join(f"p{i}w{k}" for k in range(prompt_words)),
        completion=" ".join("w" for _ in range(completion_words)),
    )


def corpus(n: int, seed: int = 5) -> list[Conversation]:
    rng = random.Random(seed)
    return [conv(i, rng.randint(1, 1200), rng.randint(1, 1500)) for i in range(n)]


def vllm_reference(convs, num, seed, min_len=4, max_prompt=1024, max_total=2048):
    """vLLM's procedure as its source reads: global seed, shuffle, per-entry filter."""
    data = list(convs)
    state = random.getstate()
    try:
        random.seed(seed)
        random.shuffle(data)
    finally:
        random.setstate(state)
    out = []
    for c in data:
        if len(out) >= num:
            break
        p, o = len(c.prompt.split()), len(c.completion.split())
        if p < min_len or o < min_len or p > max_prompt or p + o > max_total:
            continue
        out.append((c.prompt, p, o))
    return out


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_matches_vllms_shuffle_and_filters(seed):
    convs = corpus(400)
    got = sample_requests(convs, 100, seed=seed, count_tokens=words)
    assert [(r.prompt, r.prompt_len, r.expected_output_len) for r in got] == vllm_reference(convs, 100, seed)
    assert [r.index for r in got] == list(range(100))


def test_same_seed_is_byte_identical_and_another_seed_differs():
    convs = load_sharegpt(FIXTURES / "valid.json") + corpus(300)
    a = sample_requests(convs, 50, seed=7, count_tokens=words)
    b = sample_requests(list(convs), 50, seed=7, count_tokens=words)

    def serial(rs):
        return json.dumps([asdict(r) for r in rs], ensure_ascii=False).encode()

    assert serial(a) == serial(b)
    c = sample_requests(convs, 50, seed=8, count_tokens=words)
    assert [r.prompt for r in c] != [r.prompt for r in a]


def test_sampling_does_not_touch_the_global_random_state():
    random.seed(123)
    before = random.random()
    random.seed(123)
    sample_requests(corpus(50), 5, seed=0, count_tokens=words)
    assert random.random() == before


@pytest.mark.parametrize(
    "p, o, kept",
    [
        (4, 4, True),  # both at min_len: kept (inclusive)
        (3, 10, False),  # prompt too short
        (10, 3, False),  # reference completion too short
        (1024, 1024, True),  # prompt at max_prompt_len, total at max_total_len
        (1025, 10, False),  # prompt too long
        (1000, 1049, False),  # total too long
    ],
)
def test_length_filters_use_vllms_defaults(p, o, kept):
    convs = [conv(0, p, o), conv(1, 10, 10)]
    got = sample_requests(convs, 1, seed=0, count_tokens=words, oversample=True)
    if kept:
        # with one of two passing the test needs both; ask for 2 without oversampling
        both = sample_requests(convs, 2, seed=0, count_tokens=words)
        assert sorted(r.prompt_len for r in both) == sorted([p, 10])
    else:
        assert got[0].prompt_len == 10
        with pytest.raises(NotEnoughPromptsError):
            sample_requests(convs, 2, seed=0, count_tokens=words)


def test_custom_filters():
    convs = [conv(i, 10 * (i + 1), 5) for i in range(10)]  # prompts 10..100 words
    got = sample_requests(convs, 3, seed=0, count_tokens=words, max_prompt_len=30, max_total_len=40, min_len=5)
    assert sorted(r.prompt_len for r in got) == [10, 20, 30]


def test_output_len_overrides_the_reference_and_skips_its_minimum():
    convs = [conv(0, 10, 1), conv(1, 12, 2)]  # completions shorter than min_len
    calls: list[list[str]] = []

    def counting(texts):
        calls.append(texts)
        return words(texts)

    got = sample_requests(convs, 2, seed=0, count_tokens=counting, output_len=256)
    assert sorted(r.prompt_len for r in got) == [10, 12]
    assert all(r.expected_output_len == 256 for r in got)
    # completions are not even tokenized then
    assert all(t.startswith("p") for batch in calls for t in batch)


def test_output_len_still_bounds_the_total():
    got_ok = sample_requests([conv(0, 1000, 5)], 1, seed=0, count_tokens=words, output_len=1048)
    assert got_ok[0].expected_output_len == 1048
    with pytest.raises(NotEnoughPromptsError):
        sample_requests([conv(0, 1000, 5)], 1, seed=0, count_tokens=words, output_len=1049)


def test_too_few_prompts_is_a_clear_error():
    convs = [conv(0, 10, 10), conv(1, 2, 10), conv(2, 20, 20)]
    with pytest.raises(NotEnoughPromptsError) as e:
        sample_requests(convs, 5, seed=0, count_tokens=words)
    msg = str(e.value)
    assert "only 2 of 3 conversations" in msg and "5 prompts were asked for" in msg
    assert "max_prompt_len=1024" in msg and "oversample=True" in msg


def test_none_usable_is_an_error_even_with_oversampling():
    with pytest.raises(NotEnoughPromptsError, match="only 0 of 1"):
        sample_requests([conv(0, 1, 1)], 3, seed=0, count_tokens=words, oversample=True)


def test_oversampling_repeats_kept_prompts_deterministically():
    convs = [conv(i, 10 + i, 10) for i in range(3)] + [conv(9, 1, 1)]
    a = sample_requests(convs, 10, seed=3, count_tokens=words, oversample=True)
    b = sample_requests(convs, 10, seed=3, count_tokens=words, oversample=True)
    assert a == b and len(a) == 10
    assert [r.index for r in a] == list(range(10))
    first = {r.prompt for r in a[:3]}
    assert len(first) == 3 and {r.prompt for r in a[3:]} <= first
    # vLLM's top-up: random.seed(seed); random.choices(kept, k=missing)
    expected = random.Random(3).choices(a[:3], k=7)
    assert [r.prompt for r in a[3:]] == [r.prompt for r in expected]


def test_counter_is_called_in_batches():
    calls = []

    def counting(texts):
        calls.append(len(texts))
        return words(texts)

    sample_requests(corpus(2000), 500, seed=0, count_tokens=counting)
    assert 1 <= len(calls) <= 4  # batches, not one call per conversation
    assert calls[0] >= 2 * 500  # prompts and completions of >= 500 conversations


def test_default_counter_is_the_approximation():
    convs = load_sharegpt(FIXTURES / "valid.json")
    got = sample_requests(convs, 4, seed=0)
    from pytest_llmperf.workload.token_counts import approx_token_count

    assert {r.prompt_len for r in got} == {approx_token_count(c.prompt) for c in convs}


@pytest.mark.parametrize(
    "bad",
    [
        lambda texts: [1] * (len(texts) - 1),  # wrong length
        lambda texts: [-1] * len(texts),  # negative
        lambda texts: [1.5] * len(texts),  # not an int
    ],
)
def test_a_broken_counter_is_reported(bad):
    with pytest.raises(DatasetError, match="token counter returned"):
        sample_requests(corpus(10), 2, seed=0, count_tokens=bad)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_prompts": 0}, "num_prompts must be >= 1"),
        ({"num_prompts": -3}, "num_prompts must be >= 1"),
        ({"num_prompts": True}, "num_prompts must be an integer"),
        ({"num_prompts": "5"}, "num_prompts must be an integer"),
        ({"num_prompts": 2, "seed": 1.5}, "seed must be an integer"),
        ({"num_prompts": 2, "max_prompt_len": 0}, "max_prompt_len must be >= 1"),
        ({"num_prompts": 2, "min_len": -1}, "min_len must be >= 0"),
        ({"num_prompts": 2, "output_len": 0}, "output_len must be >= 1"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(DatasetError, match=match):
        sample_requests(corpus(10), count_tokens=words, **kwargs)


def test_no_conversations():
    with pytest.raises(DatasetError, match="no conversations"):
        sample_requests([], 1)
