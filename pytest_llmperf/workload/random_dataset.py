"""vLLM's `random` dataset: prompts of set token lengths built from token ids, drawn from
one seeded generator in `vllm bench serve --dataset-name random`'s order. With the served
model's tokenizer the prompts are vLLM's very own; with `BuiltinTokenizer` (no model
files) the lengths are, and the texts are those lengths for the simulator's tokenizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from string import ascii_lowercase
from typing import Any, Protocol, cast

from pytest_llmperf.util.values import Value, is_number, whole
from pytest_llmperf.workload.requests import SampledRequest

# vLLM's defaults (RandomDataset.DEFAULT_*; `vllm bench serve --random-*`).
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 128
DEFAULT_RANGE_RATIO = 0.0
DEFAULT_PREFIX_LEN = 0
# What a range ratio may be, for the flag, the marker and RandomSettings alike.
RANGE_RATIO: Value[float] = Value(
    "a number in [0, 1) (0: every request the same lengths)", lambda v: is_number(v) and 0 <= v < 1, float
)
# vLLM's gen_prompt_decode_to_target_len: decode/re-encode rounds before giving up.
MAX_RETRY = 10


class RandomDatasetError(ValueError):
    """The random dataset's settings cannot give prompts; the message says which and the fix."""


class Tokenizer(Protocol):
    """What sampling needs of a tokenizer: a Hugging Face tokenizer has exactly these."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def all_special_ids(self) -> list[int]: ...

    def num_special_tokens_to_add(self) -> int: ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class BuiltinTokenizer:
    """A vocabulary of 17,576 pieces, " aaa" to " zzz", no special tokens: each one token
    for the simulator's tokenizer, never merging (a real BPE makes about two of each)."""

    PIECE_CHARS = 4

    def __init__(self, num_special: int = 0) -> None:
        # `num_special`: the server tokenizer's special tokens, taken off the drawn lengths.
        self._pieces = [" " + "".join(letters) for letters in product(ascii_lowercase, repeat=3)]
        self._ids = {piece: i for i, piece in enumerate(self._pieces)}
        self._num_special = num_special

    @property
    def vocab_size(self) -> int:
        return len(self._pieces)

    @property
    def all_special_ids(self) -> list[int]:
        return []

    def num_special_tokens_to_add(self) -> int:
        return self._num_special

    def decode(self, ids: list[int]) -> str:
        return "".join(self._pieces[i] for i in ids)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        size = self.PIECE_CHARS
        if len(text) % size:
            raise ValueError(f"not a text of built-in pieces: {text[:40]!r}")
        try:
            return [self._ids[text[i : i + size]] for i in range(0, len(text), size)]
        except KeyError as exc:
            raise ValueError(f"not a built-in piece: {exc.args[0]!r}") from None


@dataclass(frozen=True)
class RandomSettings:
    """`vllm bench serve --random-input-len --random-output-len --random-range-ratio
    --random-prefix-len`, checked: RandomDatasetError names the setting and the fix."""

    input_len: int = DEFAULT_INPUT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    range_ratio: float = DEFAULT_RANGE_RATIO
    prefix_len: int = DEFAULT_PREFIX_LEN

    def __post_init__(self) -> None:
        for name, least in (("input_len", 0), ("output_len", 1), ("prefix_len", 0)):
            whole(least).require(getattr(self, name), f"random_{name}", RandomDatasetError)
        RANGE_RATIO.require(self.range_ratio, "random_range_ratio", RandomDatasetError)

    def bounds(self, num_special: int = 0) -> tuple[tuple[int, int], tuple[int, int]]:
        """The (low, high) of the input lengths (less `num_special`) and of the output lengths."""
        real_input = max(0, self.input_len - num_special)
        r = float(self.range_ratio)
        inputs = (math.floor(real_input * (1 - r)), math.ceil(real_input * (1 + r)))
        outputs = (max(1, math.floor(self.output_len * (1 - r))), max(1, math.ceil(self.output_len * (1 + r))))
        if self.prefix_len + inputs[0] < 1:
            raise RandomDatasetError(
                f"random_input_len={self.input_len} is too small: with {num_special} special token(s) and range "
                f"ratio {r:g} a prompt could have {self.prefix_len + inputs[0]} tokens; raise random_input_len "
                "or random_prefix_len, or lower random_range_ratio"
            )
        return inputs, outputs

    def describe(self) -> dict[str, Any]:
        return {
            "input_len": self.input_len,
            "output_len": self.output_len,
            "range_ratio": float(self.range_ratio),
            "prefix_len": self.prefix_len,
        }


def sample_random(
    num_prompts: int,
    settings: RandomSettings,
    *,
    seed: int = 0,
    tokenizer: Tokenizer | None = None,
    extra: int = 0,
) -> list[SampledRequest]:
    """`num_prompts` prompts as vLLM samples them, then `extra` more (the warm-up's) from
    the same generator, leaving the measured ones unchanged."""
    import numpy as np

    for name, value, least in (("num_prompts", num_prompts, 1), ("extra", extra, 0), ("seed", seed, None)):
        whole(least).require(value, name, RandomDatasetError)
    tok: Tokenizer = BuiltinTokenizer() if tokenizer is None else tokenizer
    rng = np.random.default_rng(seed)
    num_special = int(tok.num_special_tokens_to_add())
    (in_low, in_high), (out_low, out_high) = settings.bounds(num_special)
    vocab_size = int(tok.vocab_size)
    # Every id but the special ones, in the order vLLM's set difference gives.
    allowed = np.array(list(set(np.arange(vocab_size)) - set(tok.all_special_ids)))

    def lengths(n: int) -> tuple[Any, Any, Any]:
        return (
            rng.integers(in_low, in_high + 1, size=n),
            rng.integers(out_low, out_high + 1, size=n),
            rng.integers(0, vocab_size, size=n),
        )

    measured = lengths(num_prompts)
    prefix: list[int] = []
    if settings.prefix_len > 0:
        ids = [int(i) for i in allowed[rng.integers(0, len(allowed), size=settings.prefix_len)]]
        prefix = _to_length(tok, ids, settings.prefix_len, rng)[1]
    requests = _requests(tok, rng, allowed, prefix, settings.prefix_len, measured, start=0)
    if extra:
        requests += _requests(tok, rng, allowed, prefix, settings.prefix_len, lengths(extra), start=num_prompts)
    return requests


def _requests(
    tok: Tokenizer,
    rng: Any,
    allowed: Any,
    prefix: list[int],
    prefix_len: int,
    drawn: tuple[Any, Any, Any],
    start: int,
) -> list[SampledRequest]:
    import numpy as np

    input_lens, output_lens, offsets = drawn
    out = []
    for i in range(len(input_lens)):
        n = int(input_lens[i])
        inner = allowed[(int(offsets[i]) + i + np.arange(n)) % len(allowed)].tolist()
        prompt, ids = _to_length(tok, prefix + inner, prefix_len + n, rng)
        out.append(SampledRequest(start + i, prompt, len(ids), int(output_lens[i])))
    return out


def _to_length(tok: Tokenizer, ids: list[int], target: int, rng: Any) -> tuple[str, list[int]]:
    """Decode `ids`, re-encode, and cut or top up (random ids from `rng`) until the text is
    `target` tokens, at most MAX_RETRY rounds (vLLM's gen_prompt_decode_to_target_len)."""
    tries = MAX_RETRY
    while True:
        text = tok.decode(ids)
        ids = list(tok.encode(text, add_special_tokens=False))
        if tries <= 0 or len(ids) == target:
            return text, ids
        if len(ids) < target:
            ids += rng.integers(0, tok.vocab_size, size=target - len(ids)).tolist()
        else:
            ids = ids[:target]
        tries -= 1


def load_tokenizer(name: str) -> Tokenizer:
    """A Hugging Face tokenizer by model name or folder (`transformers` must be installed),
    for prompts identical to `vllm bench serve`'s on that model."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise RandomDatasetError(
            f"tokenizer {name!r}: the `transformers` package is not installed; pip install 'pytest-llmperf[hf]', "
            "or leave the tokenizer out (prompts of other text, made to the lengths the server counts)"
        ) from None
    try:
        tokenizer = cast(Tokenizer, AutoTokenizer.from_pretrained(name))
    except (OSError, ValueError) as exc:
        raise RandomDatasetError(f"tokenizer {name!r} cannot be loaded: {exc}") from None
    return tokenizer
