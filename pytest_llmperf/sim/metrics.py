"""vLLM's Prometheus metrics for the simulated engine, as a real vLLM 0.32 page has them
(tests/fixtures/reference/), in a registry per server."""

from __future__ import annotations

from typing import Any, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

from pytest_llmperf.sim.engine import Emission, SimRequest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Histogram bucket bounds, as on a real vLLM 0.32 /metrics page (data tables, kept compact).
# fmt: off
_TOKENS_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
_ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0)
_LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                    480.0, 960.0, 1920.0, 7680.0)
# fmt: on

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")

# Read back by the plugin as *_total counters (metrics/prometheus.py ENGINE_LAG_*).
STEP_SECONDS = "llmperf_sim:engine_step_seconds"
LAG_SECONDS = "llmperf_sim:engine_lag_seconds"

_LABELS = ("model_name", "engine")
# key -> (name, help[, buckets]), rendered in this order (spec decoding's with a draft model only).
_SPEC_COUNTERS = {
    "drafts": ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts."),
    "draft_tokens": ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens."),
    "accepted": ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."),
}
_GAUGES = {
    "running": ("vllm:num_requests_running", "Number of requests in model execution batches."),
    "waiting": ("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
    "kv_usage": ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
}
_COUNTERS = {
    "preemptions": ("vllm:num_preemptions", "Cumulative number of preemption from the engine."),
    "prompt_tokens": ("vllm:prompt_tokens", "Number of prefill tokens processed."),
    "generation_tokens": ("vllm:generation_tokens", "Number of generation tokens processed."),
}
# fmt: off
_HISTOGRAMS = {
    "req_prompt": ("vllm:request_prompt_tokens", "Number of prefill tokens processed.", _TOKENS_BUCKETS),
    "req_gen": ("vllm:request_generation_tokens", "Number of generation tokens processed.", _TOKENS_BUCKETS),
    "iteration": ("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION_BUCKETS),
    "max_tokens": ("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                   _TOKENS_BUCKETS),
    "ttft": ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _TTFT_BUCKETS),
    "itl": ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", _ITL_BUCKETS),
    "tpot": ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
             _ITL_BUCKETS),
    "e2e": ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", _LATENCY_BUCKETS),
    "queue": ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
              _LATENCY_BUCKETS),
    "inference": ("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                  _LATENCY_BUCKETS),
    "prefill_time": ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                     _LATENCY_BUCKETS),
    "decode_time": ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                    _LATENCY_BUCKETS),
}
# fmt: on
# The simulator's own: how far behind its schedule the engine loop ran (a host too busy).
_SIM_COUNTERS = {
    "step_seconds": (STEP_SECONDS, "Simulator only: scheduled engine step time, real seconds."),
    "lag_seconds": (LAG_SECONDS, "Simulator only: how late engine steps ended behind their schedule, real seconds."),
}

_Metric = TypeVar("_Metric", Counter, Gauge, Histogram)


class VllmMetrics:
    """The metric families, and the engine's StatsSink that feeds them."""

    def __init__(self, model_name: str, num_spec_tokens: int, engine: str = "0", counter_scale: float = 1.0) -> None:
        self.counter_scale = counter_scale  # SimConfig.counter_scale: the generation counter lies
        self.registry = r = CollectorRegistry()
        process_collector.ProcessCollector(registry=r)
        platform_collector.PlatformCollector(registry=r)
        gc_collector.GCCollector(registry=r)
        self._lv = {"model_name": model_name, "engine": engine}
        self.spec_enabled = num_spec_tokens > 0
        self.counters: dict[str, Counter] = {}
        if self.spec_enabled:
            self.counters = self._families(Counter, _SPEC_COUNTERS)
            doc = "Accepted tokens per draft position."
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", doc, [*_LABELS, "position"], registry=r)
            self.per_pos = [per_pos.labels(position=str(i), **self._lv) for i in range(num_spec_tokens)]
        self.gauges = self._families(Gauge, _GAUGES)
        self.counters.update(self._families(Counter, _COUNTERS))
        doc = "Count of successfully processed requests."
        success = Counter("vllm:request_success", doc, [*_LABELS, "finished_reason"], registry=r)
        self.success = {reason: success.labels(finished_reason=reason, **self._lv) for reason in FINISHED_REASONS}
        self.hist = self._families(Histogram, _HISTOGRAMS)
        self.counters.update(self._families(Counter, _SIM_COUNTERS))

    def _families(self, kind: type[_Metric], table: dict[str, tuple[Any, ...]]) -> dict[str, _Metric]:
        """This server's child of each family of `table`."""
        made = {}
        for key, (name, doc, *buckets) in table.items():
            extra = {"buckets": buckets[0]} if buckets else {}
            made[key] = kind(name, doc, _LABELS, registry=self.registry, **extra).labels(**self._lv)
        return made

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def set_queue(self, running: int, waiting: int, kv_usage: float) -> None:
        self.gauges["running"].set(running)
        self.gauges["waiting"].set(waiting)
        self.gauges["kv_usage"].set(kv_usage)

    # -- StatsSink -----------------------------------------------------------------------
    def on_admitted(self, req: SimRequest, now: float) -> None:
        self.hist["queue"].observe(max(0.0, (req.scheduled_at or now) - req.arrival))

    def on_step(
        self, emissions: list[Emission], num_tokens: int, spec: tuple[int, int, int, list[int]] | None, now: float
    ) -> None:
        self.hist["iteration"].observe(num_tokens)
        generated = 0
        for em in emissions:
            n = len(em.pieces)
            generated += n
            req = em.request
            if req.generated == n:  # this step produced the first token
                self.hist["ttft"].observe(now - req.arrival)
                self.counters["prompt_tokens"].inc(req.prompt_tokens)
            else:
                self.hist["itl"].observe(now - (req.prev_chunk_at or now))
            req.prev_chunk_at = now
        if generated:
            self.counters["generation_tokens"].inc(generated * self.counter_scale)
        if spec and self.spec_enabled:
            d, dt, a, per_pos = spec
            if d:
                self.counters["drafts"].inc(d)
                self.counters["draft_tokens"].inc(dt)
                self.counters["accepted"].inc(a)
                for child, v in zip(self.per_pos, per_pos):
                    if v:
                        child.inc(v)

    def on_finished(self, req: SimRequest, now: float) -> None:
        self.success[req.finish_reason].inc()
        self.hist["req_prompt"].observe(req.prompt_tokens)
        self.hist["req_gen"].observe(req.generated)
        self.hist["max_tokens"].observe(req.max_tokens)
        self.hist["e2e"].observe(now - req.arrival)
        start = req.scheduled_at if req.scheduled_at is not None else req.arrival
        first = req.first_token_at if req.first_token_at is not None else now
        self.hist["inference"].observe(now - start)
        self.hist["prefill_time"].observe(first - start)
        self.hist["decode_time"].observe(now - first)
        if req.generated > 1:
            self.hist["tpot"].observe((now - first) / (req.generated - 1))
