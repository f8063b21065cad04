"""vLLM's Prometheus /metrics page -> counter snapshots -> spec-decode figures.

Only `*_total` samples are kept (`*_created` ones are timestamps); counters are summed
over every label but `position`, kept as the per-position breakdown.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.metrics.registry import ACCEPTANCE_LENGTH, ACCEPTANCE_RATE

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUEST_SUCCESS = "vllm:request_success_total"

SPEC_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED)

# The simulator's own timing (sim/metrics.py): scheduled step time and lateness, real s.
ENGINE_STEP_SECONDS = "llmperf_sim:engine_step_seconds_total"
ENGINE_LAG_SECONDS = "llmperf_sim:engine_lag_seconds_total"

# SpecDecodeStats.status values.
NORMAL = "ok"
NO_METRICS = "no_metrics"  # no /metrics page was captured
NO_ENGINE_STATS = "no_engine_stats"  # a page without any vllm: counters
NOT_SPECULATIVE = "not_speculative"  # engine counters, but no spec-decode families
NOT_MOVING = "stats_not_moving"  # spec families present, counters frozen
COUNTER_RESET = "counter_reset"  # a counter went backwards (server restarted)
IDLE = "idle"  # nothing generated in the window


@dataclass
class MetricsSnapshot:
    """Counter totals from one /metrics page."""

    counters: dict[str, float] = field(default_factory=dict)
    # counter sample name -> {position: value}, for counters with a `position` label
    per_position: dict[str, dict[int, float]] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        return self.counters.get(name)

    @property
    def has_spec_decode(self) -> bool:
        return any(name in self.counters for name in SPEC_COUNTERS)

    @property
    def has_engine_stats(self) -> bool:
        return any(name.startswith("vllm:") for name in self.counters)


def parse_snapshot(text: str) -> MetricsSnapshot:
    """Parse a Prometheus text page; ValueError if it is not one. A run's pages are read
    again at every look of the gate, so the last pages parsed are kept (a copy is returned)."""
    if not isinstance(text, str):
        raise TypeError(f"parse_snapshot expects the /metrics page as str, got {type(text).__name__}")
    parsed = _parse_page(text)
    return MetricsSnapshot(dict(parsed.counters), {k: dict(v) for k, v in parsed.per_position.items()})


@functools.lru_cache(maxsize=64)
def _parse_page(text: str) -> MetricsSnapshot:
    snap = MetricsSnapshot()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError, IndexError, ... on garbage
        raise ValueError(f"/metrics page is not in Prometheus text format: {exc}") from exc
    for family in families:
        # "unknown": a page without TYPE lines still carries usable *_total counters.
        if family.type not in ("counter", "unknown"):
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total") or math.isnan(sample.value):
                continue
            if "position" in sample.labels:
                try:
                    pos = int(sample.labels["position"])
                except ValueError as exc:
                    raise ValueError(
                        f"{sample.name}: position label {sample.labels['position']!r} is not an integer"
                    ) from exc
                by_pos = snap.per_position.setdefault(sample.name, {})
                by_pos[pos] = by_pos.get(pos, 0.0) + sample.value
            snap.counters[sample.name] = snap.counters.get(sample.name, 0.0) + sample.value
    return snap


@dataclass
class SpecDecodeStats:
    """Spec-decode figures over a window; figures are None unless status == "ok"."""

    status: str
    note: str | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    acceptance_rate: float | None = None  # accepted / draft_tokens
    acceptance_length: float | None = None  # 1 + accepted / drafts
    per_position: list[float] | None = None  # accepted_per_pos[i] / drafts

    @property
    def ok(self) -> bool:
        return self.status == NORMAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "note": self.note,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted": self.accepted,
            ACCEPTANCE_RATE: self.acceptance_rate,
            ACCEPTANCE_LENGTH: self.acceptance_length,
            "per_position": list(self.per_position) if self.per_position is not None else None,
        }


def _as_snapshot(value: MetricsSnapshot | str | None) -> MetricsSnapshot | None:
    if value is None or isinstance(value, MetricsSnapshot):
        return value
    return parse_snapshot(value)


def spec_decode_delta(
    before: MetricsSnapshot | str | None,
    after: MetricsSnapshot | str | None,
    generated_tokens: int | None = None,
) -> SpecDecodeStats:
    """Spec-decode figures from the counter deltas between two snapshots. `generated_tokens`
    (the client's usage) tells "stats are disabled" from "nothing happened"."""
    before, after = _as_snapshot(before), _as_snapshot(after)
    if before is None or after is None:
        return SpecDecodeStats(NO_METRICS, "no /metrics snapshots were captured around the run")
    if not after.has_engine_stats:
        return SpecDecodeStats(
            NO_ENGINE_STATS,
            "the /metrics page has no vllm: counters (server started with --disable-log-stats?); "
            "spec-decode acceptance is unknown",
        )
    if not after.has_spec_decode:
        return SpecDecodeStats(NOT_SPECULATIVE, "not a speculative-decoding server (no spec_decode counters)")

    deltas: dict[str, float] = {}
    for name in SPEC_COUNTERS + (GENERATION_TOKENS,):
        if name in after.counters:
            deltas[name] = after.counters[name] - before.counters.get(name, 0.0)
    pos_before = before.per_position.get(ACCEPTED_PER_POS, {})
    pos_after = after.per_position.get(ACCEPTED_PER_POS, {})
    pos_deltas = {p: v - pos_before.get(p, 0.0) for p, v in pos_after.items()}

    went_back = sorted(n for n, d in deltas.items() if d < 0)
    went_back += [f"{ACCEPTED_PER_POS}{{position={p}}}" for p, d in sorted(pos_deltas.items()) if d < 0]
    if went_back:
        return SpecDecodeStats(
            COUNTER_RESET,
            "counters went backwards during the run (server restarted?): "
            + ", ".join(went_back)
            + "; spec-decode figures for this window are unknown",
        )

    drafts = deltas.get(DRAFTS, 0.0)
    draft_tokens = deltas.get(DRAFT_TOKENS, 0.0)
    accepted = deltas.get(ACCEPTED, 0.0)
    if drafts == 0 or draft_tokens == 0:
        # Either witness will do: the server's own counter may be frozen too.
        generated = max(deltas.get(GENERATION_TOKENS) or 0, generated_tokens or 0)
        if generated:
            return SpecDecodeStats(
                NOT_MOVING,
                f"spec-decode counters did not move while {generated:g} tokens were generated: "
                "stats are disabled on the server (e.g. --disable-log-stats) or the proposer drafted "
                "nothing; acceptance is unknown, not zero",
                drafts=drafts,
                draft_tokens=draft_tokens,
                accepted=accepted,
            )
        return SpecDecodeStats(IDLE, "no tokens were generated in the window", drafts, draft_tokens, accepted)

    per_position = None
    if pos_deltas:
        n = max(pos_deltas) + 1
        per_position = [pos_deltas.get(i, 0.0) / drafts for i in range(n)]
    return SpecDecodeStats(
        NORMAL,
        None,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        acceptance_rate=accepted / draft_tokens,
        acceptance_length=1.0 + accepted / drafts,
        per_position=per_position,
    )


def engine_lag_delta(before: MetricsSnapshot | str | None, after: MetricsSnapshot | str | None) -> float | None:
    """The simulator's engine lag over a window, as a share of the step time (0.05: steps
    ended 5 % late on average); None without such counters or steps."""
    before, after = _as_snapshot(before), _as_snapshot(after)
    if before is None or after is None:
        return None
    steps, lag = (after.counters.get(n) for n in (ENGINE_STEP_SECONDS, ENGINE_LAG_SECONDS))
    if steps is None or lag is None:
        return None
    steps -= before.counters.get(ENGINE_STEP_SECONDS, 0.0)
    lag -= before.counters.get(ENGINE_LAG_SECONDS, 0.0)
    return lag / steps if steps > 0 and lag >= 0 else None
