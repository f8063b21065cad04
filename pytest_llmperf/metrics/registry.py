"""The metric registry: every figure a run can be judged on, one row each. A row holds
the figure's direction, unit, default tolerance, time scaling, decimals and meaning; how
the paired bootstrap recomputes it on resampled requests (its noise estimator); what it
needs besides a completed request, each need with its own reason when the figure has no
data; whether a run gates it by default; and its role in tables and reports (a column of
the measured table, a key figure of the JUnit properties). The summary
(metrics/summary.py) fills each row's field, or a row derives its figure from the
others. Nothing else infers a metric's nature from its name: code that needs one figure
in particular takes its name from the constants below. `acceptance_pos<i>` stands for
every draft position.

The module's functions read the registry in force: `REGISTRY`, or within
`using(registry)` another one (`REGISTRY.with_rows(...)`: a copy with rows added).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pytest_llmperf.metrics.rows import (
    PER_POSITION,
    PLANNED,
    Derive,
    Direction,
    Estimator,
    Metric,
    Needs,
    OverRequests,
    Registry,
    ScaledRatio,
    Scaling,
    Tolerance,
    UnknownMetric,
)

__all__ = [
    "ACCEPTANCE_LENGTH",
    "ACCEPTANCE_RATE",
    "ANSWERED",
    "CAPACITY",
    "CAPACITY_BROKEN_AT",
    "COMPLETED",
    "DECODE",
    "DURATION",
    "FAILED",
    "GATED_DECODE",
    "METRICS",
    "MIN_EACH_SIDE",
    "PER_POSITION",
    "PLANNED",
    "REASONING_METRICS",
    "REGISTRY",
    "SPEEDUP",
    "TPOT_MEAN",
    "TPOT_MEDIAN",
    "Derive",
    "Direction",
    "Estimator",
    "Metric",
    "Needs",
    "OverRequests",
    "Registry",
    "Scaling",
    "ScaledRatio",
    "Tolerance",
    "UnknownMetric",
    "active",
    "check_names",
    "flatten",
    "format_value",
    "is_known",
    "markdown_table",
    "metric",
    "to_real_time",
    "unknown_message",
    "using",
]


# Names code takes from the rows where it needs one figure in particular.
DECODE = "decode_tok_s"
GATED_DECODE = "steady_decode_tok_s"  # what an MTP speedup divides and the default gate judges
SPEEDUP = "mtp_speedup"
ACCEPTANCE_RATE, ACCEPTANCE_LENGTH = "acceptance_rate", "acceptance_length"
TPOT_MEAN, TPOT_MEDIAN = "tpot_ms_mean", "tpot_ms_median"
COMPLETED, FAILED, DURATION = "completed", "failed", "duration_s"
ANSWERED = "answered"
# A capacity search's figure (llmperf.capacity): the largest load decided within the SLOs,
# and the smallest decided broken above it (its interval's other end, which its noise reads).
CAPACITY, CAPACITY_BROKEN_AT = "capacity", "capacity_broken_at"

_H, _L = Direction.HIGHER, Direction.LOWER
_REL5, _REL10 = Tolerance("relative", 0.05), Tolerance("relative", 0.10)
_REL3 = Tolerance("relative", 0.03)
_SPEC, _SLOS, _REASONING = (Needs.SPEC_DECODE,), (Needs.SLOS,), (Needs.REASONING,)
_LATENCY = {
    "ttft": "time to first token: first token chunk (any chunk with choices) minus send time",
    "tpot": "time per output token: (E2EL - TTFT) / (output tokens - 1), per request",
    "itl": "inter-chunk latency, pooled over every chunk gap (per chunk, not per token)",
    "e2el": "end-to-end latency: last token chunk minus send time",
}
_COLUMNS = {"ttft_ms_median": "TTFT p50 ms", "tpot_ms_median": "TPOT p50 ms", "ttfa_ms_median": "TTFA p50 ms"}
_TTFA = (
    "time to first answer token (reasoning runs): first chunk with answer text (`content`, after the "
    "reasoning) minus send time, over the requests that answered"
)
_STATS = {"mean": "mean", "median": "median", "p90": "90th percentile", "p99": "99th percentile"}
# Five requests on each side of a percentile (ten for the mean): with fewer, one request
# changing rank moves the statistic by the gap between two.
MIN_EACH_SIDE = 5
_MIN_REQUESTS = {
    "mean": 2 * MIN_EACH_SIDE,
    "median": 2 * MIN_EACH_SIDE,
    "p90": 10 * MIN_EACH_SIDE,
    "p99": 100 * MIN_EACH_SIDE,
}


def _rate(*tokens: str) -> ScaledRatio:
    """A throughput's estimator: its tokens (none: requests) per second of request time."""
    return ScaledRatio(tokens, "e2el_ms")


_ACCEPTED = ScaledRatio(("accepted",), "drafts")  # each decode step streams one chunk of 1 + accepted tokens

_TABLE: tuple[Metric, ...] = (
    Metric(
        DECODE,
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "sum of output tokens (from `usage`) / wall duration",
        _REL5,
        estimator=_rate("output_tokens"),
        column="decode tok/s",
        key=True,
    ),
    Metric(
        GATED_DECODE,
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "output tokens / s while >= 90% of the concurrency was in flight (no ramp-down tail)",
        _REL3,  # the gated decode figure: 3 % catches a 5 % drop
        estimator=_rate("output_tokens"),
        gated=True,
        column="steady tok/s",
    ),
    Metric(
        "prefill_tok_s",
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "sum of prompt tokens / wall duration",
        _REL5,
        estimator=_rate("prompt_tokens"),
        column="prefill tok/s",
        key=True,
    ),
    Metric(
        "total_tok_s",
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "prompt and output tokens / wall duration",
        estimator=_rate("output_tokens", "prompt_tokens"),
    ),
    Metric(
        "request_throughput",
        _H,
        "req/s",
        Scaling.RATE,
        3,
        "completed requests / wall duration",
        _REL5,
        estimator=_rate(),
    ),
    Metric(
        "request_goodput",
        _H,
        "req/s",
        Scaling.RATE,
        3,
        "completed requests meeting every SLO (TTFT, TPOT, E2EL <= the marker's `slos=` or --llmperf-slos, ms) "
        "/ wall duration, as `vllm bench serve --goodput`; none without SLOs",
        _REL5,
        estimator=_rate("good"),
        needs=_SLOS,
        gated=True,
        column="goodput req/s",
        key=True,
    ),
    Metric(
        "slo_attainment",
        _H,
        "ratio",
        Scaling.NONE,
        3,
        "share of completed requests meeting every SLO; none without SLOs",
        Tolerance("absolute", 0.05),
        estimator=ScaledRatio(("good",), None),
        needs=_SLOS,
        gated=True,
        column="SLO met",
        key=True,
    ),
    Metric(
        "per_stream_tok_s",
        _H,
        "tok/s",
        Scaling.RATE,
        1,
        "1 / median TPOT: the decode speed one stream sees",
        estimator=OverRequests("tpot_ms", "median", inverse=1000.0),
    ),
    *(
        Metric(
            f"{kind}_ms_{stat}",
            _L,
            "ms",
            Scaling.DURATION,
            1,
            f"{_STATS[stat]} {meaning}",
            _REL10 if stat == "median" else None,
            None if kind == "itl" else _MIN_REQUESTS[stat],  # ITL: over chunk gaps, not requests
            estimator=None if kind == "itl" else OverRequests(f"{kind}_ms", stat),
            column=_COLUMNS.get(f"{kind}_ms_{stat}", ""),
            key=f"{kind}_ms_{stat}" in _COLUMNS,
        )
        for kind, meaning in _LATENCY.items()
        for stat in _STATS
    ),
    *(
        Metric(
            f"ttfa_ms_{stat}",
            _L,
            "ms",
            Scaling.DURATION,
            1,
            f"{_STATS[stat]} {_TTFA}",
            _REL10 if stat == "median" else None,
            _MIN_REQUESTS[stat],
            needs=(Needs.REASONING, Needs.ANSWER),
            column=_COLUMNS.get(f"ttfa_ms_{stat}", ""),
            key=f"ttfa_ms_{stat}" in _COLUMNS,
        )
        for stat in _STATS
    ),
    Metric(
        ANSWERED,
        _H,
        "requests",
        Scaling.NONE,
        0,
        "reasoning runs: completed requests whose reply got past its reasoning to answer text",
        needs=_REASONING,
    ),
    Metric(
        "total_reasoning_tokens",
        _L,
        "tokens",
        Scaling.NONE,
        0,
        "reasoning runs: reasoning tokens of completed requests (usage `completion_tokens_details.reasoning_tokens`)",
        needs=_REASONING,
    ),
    Metric(
        "total_answer_tokens",
        _H,
        "tokens",
        Scaling.NONE,
        0,
        "reasoning runs: output tokens that are not reasoning (the answer, `</think>` and EOS included)",
        needs=_REASONING,
    ),
    Metric(
        "reasoning_share",
        _L,
        "ratio",
        Scaling.NONE,
        3,
        "reasoning runs: reasoning tokens / output tokens, over completed requests",
        needs=_REASONING,
        column="reasoning share",
    ),
    Metric(
        ACCEPTANCE_RATE,
        _H,
        "ratio",
        Scaling.NONE,
        3,
        "Δaccepted / Δdraft tokens (vLLM's spec-decode counters over the run)",
        Tolerance("absolute", 0.02),  # the gated acceptance figure: 0.02 catches a 0.03 drop
        estimator=_ACCEPTED,
        needs=_SPEC,
        gated=True,
        column="accept rate",
        key=True,
    ),
    Metric(
        ACCEPTANCE_LENGTH,
        _H,
        "tokens",
        Scaling.NONE,
        2,
        "1 + Δaccepted / Δdrafts",
        _REL5,
        estimator=ScaledRatio(("accepted",), "drafts", offset=1.0),
        needs=_SPEC,  # gated beside the rate: the rate alone can rise while the length falls
        gated=True,
        column="accept len",
        key=True,
    ),
    Metric(
        "acceptance_pos<i>",
        _H,
        "ratio",
        Scaling.NONE,
        3,
        "Δaccepted at draft position i / Δdrafts",
        estimator=_ACCEPTED,
        needs=_SPEC,
    ),
    Metric(
        SPEEDUP,
        _H,
        "x",
        Scaling.NONE,
        3,
        "MTP steady decode tok/s / base's, same workload. The -3 % tolerance: the box's shift of a night "
        "cancels in the ratio, so its noise is the two servers' starts alone; at -5 % a 5 % speedup loss sat on "
        "the tolerance and was red within two simulated nights 13 % of the time, at -3 % 30 %, unchanged nights "
        "red 0 of 200 either way (docs/verdicts.md, benchmarks/nights.py)",
        _REL3,
        needs=(Needs.BASE_RUN,),
    ),
    Metric(
        CAPACITY,
        _H,
        "users",
        Scaling.NONE,
        0,
        "capacity at SLOs (`llmperf.capacity(...)`, docs/capacity.md): the largest concurrency whose runs meet "
        "every SLO in the share asked, decided at the test's confidence; its noise is its interval's width "
        "(from here to `capacity_broken_at`, the search's resolution) on both sides, as a uniform error. "
        "The -10 % tolerance is one search step at 10 users (a search finds whole users, so a tolerance under "
        "one step reads every judgement inconclusive) and kept the seed suite's capacities green on 40 of 40 "
        "unchanged simulated nights where -5 % was red on 2 (benchmarks/nights.py --capacity)",
        _REL10,
        needs=_SLOS,
        key=True,
    ),
    Metric(
        CAPACITY_BROKEN_AT,
        _H,
        "users",
        Scaling.NONE,
        0,
        "a capacity's interval: the smallest concurrency decided over an SLO above the capacity; recorded "
        "with it, read for its noise",
        needs=_SLOS,
    ),
    Metric(COMPLETED, _H, "requests", Scaling.NONE, 0, "requests that finished without error"),
    Metric(FAILED, _L, "requests", Scaling.NONE, 0, "requests that ended in an error"),
    Metric("total_prompt_tokens", _H, "tokens", Scaling.NONE, 0, "prompt tokens of completed requests"),
    Metric("total_output_tokens", _H, "tokens", Scaling.NONE, 0, "output tokens of completed requests"),
    Metric(DURATION, _L, "s", Scaling.DURATION, 2, "first dispatch to last completion, warm-up excluded"),
)


REGISTRY = Registry(_TABLE)
METRICS: dict[str, Metric] = REGISTRY.by_name
# None (absent from tables, reports and baselines) unless a run's replies carried reasoning.
REASONING_METRICS = REGISTRY.needing(Needs.REASONING)
_ACTIVE: ContextVar[Registry] = ContextVar("llmperf_metric_registry", default=REGISTRY)


def active() -> Registry:
    """The registry in force: REGISTRY, or the one `using` put in force."""
    return _ACTIVE.get()


@contextmanager
def using(registry: Registry) -> Iterator[Registry]:
    """Within the block, every lookup (judging, summaries, tables, reports) reads `registry`:
    a copy with rows added (`REGISTRY.with_rows(...)`)."""
    token = _ACTIVE.set(registry)
    try:
        yield registry
    finally:
        _ACTIVE.reset(token)


def metric(name: str) -> Metric:
    """The registry entry for `name`; UnknownMetric (with the nearest names) otherwise."""
    return active().metric(name)


def is_known(name: str) -> bool:
    return active().is_known(name)


def unknown_message(name: Any, where: str = "") -> str:
    return active().unknown_message(name, where)


def check_names(names: Iterable[str], where: str = "") -> None:
    """Raise UnknownMetric for the first name the registry does not know."""
    for name in names:
        if not is_known(name):
            raise UnknownMetric(unknown_message(name, where))


def flatten(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """A summary's known scalar figures by name, the per-position list as acceptance_pos1..k."""
    return active().flatten(summary)


def to_real_time(figures: Mapping[str, Any], clock_speed: float) -> dict[str, Any]:
    """Figures from a clock `clock_speed` times faster, in real time: durations longer, rates lower."""
    return active().to_real_time(figures, clock_speed)


def format_value(name: str, value: float | None) -> str:
    """A figure with the decimals that suit its metric: 407.9 tok/s, 0.670 rate, 624.0 ms."""
    if value is None:
        return "-"
    return f"{value:.{metric(name).decimals}f}"


def markdown_table() -> str:
    """The metric table of docs/reference/metrics.md, generated from the registry (a test keeps them equal)."""
    return active().markdown_table()
