"""vLLM's random dataset: lengths, seeds, prefix, the built-in tokenizer, bad settings.

Equality with vLLM's own RandomDataset on a real tokenizer is checked against the
prepared vLLM venv in tests/real/test_random_dataset_vllm.py (slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_llmperf.sim.tokenizer import count_tokens
from pytest_llmperf.workload.random_dataset import (
    BuiltinTokenizer,
    RandomDatasetError,
    RandomSettings,
    load_tokenizer,
    sample_random,
)


def test_fixed_lengths_are_exact_for_the_simulators_tokenizer():
    requests = sample_random(8, RandomSettings(input_len=100, output_len=32), seed=0)
    assert [r.index for r in requests] == list(range(8))
    assert {r.prompt_len for r in requests} == {100} and {r.expected_output_len for r in requests} == {32}
    # What the simulator counts is what was asked for: the prompt is 100 of its tokens.
    assert [count_tokens(r.prompt) for r in requests] == [100] * 8
    assert len({r.prompt for r in requests}) == 8  # each request its own offset


def test_lengths_are_drawn_as_vllm_draws_them_from_one_seeded_generator():
    """vLLM's get_sampling_params: input lengths, then output lengths, then offsets, from
    numpy's default_rng(seed), over [floor(L(1-r)), ceil(L(1+r))]."""
    settings = RandomSettings(input_len=50, output_len=20, range_ratio=0.5, prefix_len=0)
    requests = sample_random(200, settings, seed=7)
    rng = np.random.default_rng(7)
    expected_in = rng.integers(math.floor(50 * 0.5), math.ceil(50 * 1.5) + 1, size=200).tolist()
    expected_out = rng.integers(math.floor(20 * 0.5), math.ceil(20 * 1.5) + 1, size=200).tolist()
    assert [r.prompt_len for r in requests] == expected_in
    assert [r.expected_output_len for r in requests] == expected_out
    assert min(expected_in) == 25 and max(expected_in) == 75  # the whole range is reached
    assert [count_tokens(r.prompt) for r in requests] == expected_in


def test_the_same_seed_gives_the_same_prompts_and_another_seed_others():
    settings = RandomSettings(input_len=40, output_len=16, range_ratio=0.25, prefix_len=4)
    one, again, other = (sample_random(6, settings, seed=s) for s in (3, 3, 4))
    assert one == again
    assert [r.prompt for r in one] != [r.prompt for r in other]


def test_the_prefix_is_shared_by_every_prompt_and_counts_in_its_length():
    requests = sample_random(5, RandomSettings(input_len=10, output_len=8, prefix_len=6), seed=1, extra=3)
    prefix = requests[0].prompt[: 6 * 4]  # a built-in piece is 4 characters
    assert all(r.prompt.startswith(prefix) for r in requests)
    assert {r.prompt_len for r in requests} == {16}
    assert [count_tokens(r.prompt) for r in requests] == [16] * 8


def test_warm_up_prompts_come_after_the_measured_ones_without_changing_them():
    settings = RandomSettings(input_len=30, output_len=8, range_ratio=0.5, prefix_len=2)
    alone = sample_random(5, settings, seed=2)
    with_warmup = sample_random(5, settings, seed=2, extra=4)
    assert with_warmup[:5] == alone
    assert [r.index for r in with_warmup] == list(range(9))
    assert not {r.prompt for r in with_warmup[5:]} & {r.prompt for r in alone}


def test_the_builtin_tokenizer_round_trips_and_refuses_foreign_text():
    tok = BuiltinTokenizer()
    assert tok.vocab_size == 26**3 and tok.all_special_ids == [] and tok.num_special_tokens_to_add() == 0
    ids = [0, 1, 17575, 42]
    assert tok.decode(ids) == " aaa aab zzz abq"
    assert tok.encode(tok.decode(ids)) == ids
    with pytest.raises(ValueError, match="not a text of built-in pieces"):
        tok.encode(" abc xyzw")  # not whole 4-character pieces
    with pytest.raises(ValueError, match="not a built-in piece: 'Hell'"):
        tok.encode("Hello world!")


class ShortEncodingTokenizer(BuiltinTokenizer):
    """A tokenizer whose re-encoding merges the first two pieces, as a BPE may: the text
    comes back one token short, and vLLM's loop tops it up from the generator."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = super().encode(text)
        return ids[1:] if len(ids) > 1 else ids


def test_a_tokenizer_that_does_not_round_trip_is_topped_up_then_given_up_on_as_vllm_does():
    requests = sample_random(3, RandomSettings(input_len=12, output_len=4), seed=0, tokenizer=ShortEncodingTokenizer())
    # Each round tops the ids up to 12 from the generator and the next encode loses one
    # again: after vLLM's ten rounds it keeps the text it has and reports its real length.
    assert [r.prompt_len for r in requests] == [11, 11, 11]
    assert [len(BuiltinTokenizer().encode(r.prompt)) for r in requests] == [12, 12, 12]


class SpecialTokens(BuiltinTokenizer):
    """Two special ids, and one special token (a BOS) added to every prompt."""

    @property
    def all_special_ids(self) -> list[int]:
        return [0, 1]

    def num_special_tokens_to_add(self) -> int:
        return 1


def test_special_tokens_are_left_out_of_prompts_and_of_the_length():
    requests = sample_random(20, RandomSettings(input_len=30, output_len=4), seed=5, tokenizer=SpecialTokens())
    tok = BuiltinTokenizer()
    assert {r.prompt_len for r in requests} == {29}  # the BOS the server adds makes it 30
    assert all(not {0, 1} & set(tok.encode(r.prompt)) for r in requests)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(input_len=-1), "random_input_len must be a whole number >= 0, got -1"),
        (dict(input_len=12.5), "random_input_len must be a whole number >= 0, got 12.5"),
        (dict(output_len=0), "random_output_len must be a whole number >= 1, got 0"),
        (dict(prefix_len=True), "random_prefix_len must be a whole number >= 0, got True"),
        (dict(range_ratio=1.0), "random_range_ratio must be a number in [0, 1) (0: every request the same lengths)"),
        (dict(range_ratio="0.1"), "random_range_ratio must be a number in [0, 1)"),
        (dict(range_ratio=-0.1), "random_range_ratio must be a number in [0, 1)"),
    ],
)
def test_bad_settings_say_which_and_the_fix(settings, message):
    with pytest.raises(RandomDatasetError) as exc:
        RandomSettings(**settings)
    assert message in str(exc.value)


def test_a_prompt_that_could_have_no_tokens_is_refused_with_the_fix():
    with pytest.raises(RandomDatasetError) as exc:
        sample_random(2, RandomSettings(input_len=0, output_len=4))
    assert str(exc.value) == (
        "random_input_len=0 is too small: with 0 special token(s) and range ratio 0 a prompt could have 0 tokens; "
        "raise random_input_len or random_prefix_len, or lower random_range_ratio"
    )
    assert len(sample_random(2, RandomSettings(input_len=0, output_len=4, prefix_len=3))) == 2  # a prefix alone


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_prompts=0), "num_prompts must be a whole number >= 1, got 0"),
        (dict(num_prompts=2, extra=-1), "extra must be a whole number >= 0, got -1"),
        (dict(num_prompts=2, seed="0"), "seed must be a whole number, got '0'"),
    ],
)
def test_bad_counts_and_seeds_are_refused(kwargs, message):
    with pytest.raises(RandomDatasetError, match=message):
        sample_random(settings=RandomSettings(input_len=8, output_len=4), **kwargs)


def test_a_tokenizer_without_transformers_says_how_to_get_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers":
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    with pytest.raises(RandomDatasetError) as exc:
        load_tokenizer("Qwen/Qwen3.6-27B")
    assert str(exc.value) == (
        "tokenizer 'Qwen/Qwen3.6-27B': the `transformers` package is not installed; pip install "
        "'pytest-llmperf[hf]', or leave the tokenizer out (prompts of other text, made to the lengths the server "
        "counts)"
    )


def test_a_model_folders_tokenizer_loads_from_the_hf_extra_and_makes_prompts_of_its_lengths(tmp_path):
    # A model folder's tokenizer files, made here: no hub, no model weights.
    pytest.importorskip("transformers", reason="the [hf] extra (in [dev])")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"]
    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(words)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>").save_pretrained(tmp_path)
    tokenizer = load_tokenizer(str(tmp_path))
    requests = sample_random(
        6, RandomSettings(input_len=12, output_len=4, range_ratio=0.5), seed=2, tokenizer=tokenizer
    )
    assert [len(tokenizer.encode(r.prompt, add_special_tokens=False)) for r in requests] == [
        r.prompt_len for r in requests
    ]
    assert len({r.prompt_len for r in requests}) > 1


def test_a_folder_without_a_tokenizer_is_named(tmp_path):
    pytest.importorskip("transformers", reason="the [hf] extra (in [dev])")
    with pytest.raises(RandomDatasetError, match=f"tokenizer '{tmp_path}' cannot be loaded"):
        load_tokenizer(str(tmp_path))
