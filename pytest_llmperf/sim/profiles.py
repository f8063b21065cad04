"""Engine profiles: the timing and acceptance parameters of one model on one GPU. A step
costs step_base_s + per_token_s * sequences * (1 + k) + prefill_per_token_s * prefill
tokens [+ k * draft_step_s]; the Qwen3.6 profiles are fitted to the seeds (docs/sim.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    step_base_s: float  # fixed cost of one engine step (weights read, launch)
    per_token_s: float  # cost per token in the batch (decode or verify)
    prefill_per_token_s: float  # cost per prompt token prefilled in a step
    draft_step_s: float = 0.0  # the draft model's cost per draft position, whatever the batch
    # Per-position acceptance as survival probabilities (vLLM's per-position rate).
    acceptance: tuple[float, ...] = (0.8, 0.6, 0.45)
    # Per-request predictability spread (logits): some prompts are easier to draft for.
    acceptance_spread: float = 0.0
    output_len_median: int = 200  # natural (EOS) output length: log-normal, from the prompt's hash
    output_len_sigma: float = 1.0
    reasoning_share: float = 0.5  # with a reasoning parser: the share of a reply spent reasoning
    kv_cache_tokens: int = 500_000  # KV capacity for vllm:kv_cache_usage_perc
    max_prefill_tokens_per_step: int = 8192  # chunked-prefill budget per step


# Fitted profiles (docs/sim.md); acceptance rates are the seeds' own.
PROFILES: dict[str, Profile] = {
    "qwen3.6-35b-a3b-fp8": Profile(
        name="qwen3.6-35b-a3b-fp8",
        step_base_s=0.07332,
        per_token_s=0.000738,
        prefill_per_token_s=0.000407,
        draft_step_s=0.00665,
        acceptance=(0.84, 0.66, 0.51),
        acceptance_spread=1.53,
        output_len_median=2000,
        output_len_sigma=1.3,
        reasoning_share=0.9,
    ),
    "qwen3.6-27b-fp8": Profile(
        name="qwen3.6-27b-fp8",
        step_base_s=0.1450,
        per_token_s=0.000992,
        prefill_per_token_s=0.000805,
        draft_step_s=0.01316,
        acceptance=(0.86, 0.69, 0.53),
        acceptance_spread=1.53,
        output_len_median=2000,
        output_len_sigma=1.3,
        reasoning_share=0.9,
    ),
}

# Any other model name: a small, fast, plausible engine.
GENERIC = Profile(
    name="generic",
    step_base_s=0.020,
    per_token_s=0.0002,
    prefill_per_token_s=0.0001,
    acceptance=(0.8, 0.6, 0.45),
    acceptance_spread=0.0,
    output_len_median=200,
    output_len_sigma=1.0,
)


def resolve_profile(model: str) -> Profile:
    """The profile for a model name (case-insensitive, org prefix and -FP8 optional)."""
    key = model.lower().rsplit("/", 1)[-1]
    for name, profile in PROFILES.items():
        base = name.removesuffix("-fp8")
        if key == name or key == base or key.startswith(base + "-"):
            return profile
    return GENERIC


def profile_by_name(name: str) -> Profile:
    if name == "generic":
        return GENERIC
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r}; known: generic, {', '.join(PROFILES)}") from None
