"""Whether the server saw the prompt lengths the sampler meant: a workload of other
lengths measures another workload, however steady its figures."""

from __future__ import annotations

from collections.abc import Iterable

from pytest_llmperf.metrics.records import RequestRecord

# How far the server's count may be from the sampler's (special tokens such as a BOS).
SLACK_TOKENS = 2
SLACK_SHARE = 0.02


def length_mismatch(records: Iterable[RequestRecord]) -> str | None:
    """Why the prompt lengths the server counted are not those the sampler meant; None when they are."""
    pairs = [
        (r.expected_prompt_len, r.prompt_tokens)
        for r in records
        if r.ok and r.expected_prompt_len is not None and r.prompt_tokens is not None
    ]
    off = [(meant, seen) for meant, seen in pairs if abs(seen - meant) > max(SLACK_TOKENS, SLACK_SHARE * meant)]
    if not off:
        return None
    meant_low, meant_high = min(m for m, _ in off), max(m for m, _ in off)
    seen_low, seen_high = min(s for _, s in off), max(s for _, s in off)
    meant = f"{meant_low}" if meant_low == meant_high else f"{meant_low}-{meant_high}"
    seen = f"{seen_low}" if seen_low == seen_high else f"{seen_low}-{seen_high}"
    total_meant, total_seen = sum(m for m, _ in pairs), sum(s for _, s in pairs)
    return (
        f"the server counted other prompt lengths than the sampler meant: {len(off)} of {len(pairs)} prompts "
        f"(intended {meant} tokens, the server counted {seen}; {total_seen} tokens in all for {total_meant} "
        "intended), so the run measured another workload"
    )
