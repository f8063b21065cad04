"""The prompts a run sends: sampled once, sent identically to every server of a model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SampledRequest:
    """One prompt chosen from the dataset, sent identically to base and MTP servers."""

    index: int
    prompt: str
    prompt_len: int  # tokens, by the server's /tokenize or the documented estimate
    expected_output_len: int  # the reference completion's length (vLLM's sampler keeps it)
