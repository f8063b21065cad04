"""vLLM's Prometheus metrics for the simulated engine, via prometheus_client.

Names, types, label names and histogram buckets follow a real vLLM 0.32 /metrics page
(tests/fixtures/reference/). Each server has its own registry, so several simulated
servers can live in one process.
"""

from __future__ import annotations

from collections.abc import Sequence

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


class VllmMetrics:
    """The metric families, and the engine's StatsSink that feeds them."""

    def __init__(self, model_name: str, num_spec_tokens: int, engine: str = "0", counter_scale: float = 1.0) -> None:
        self.counter_scale = counter_scale  # SimConfig.counter_scale: the generation counter lies
        self.registry = r = CollectorRegistry()
        process_collector.ProcessCollector(registry=r)
        platform_collector.PlatformCollector(registry=r)
        gc_collector.GCCollector(registry=r)
        names = ["model_name", "engine"]
        self._lv = {"model_name": model_name, "engine": engine}
        lv = self._lv

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=r).labels(**lv)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=r).labels(**lv)

        def hist(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, names, buckets=buckets, registry=r).labels(**lv)

        self.spec_enabled = num_spec_tokens > 0
        if self.spec_enabled:
            self.drafts = counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
            self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
            self.accepted = counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
            per_pos = Counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                [*names, "position"],
                registry=r,
            )
            self.per_pos = [per_pos.labels(position=str(i), **lv) for i in range(num_spec_tokens)]
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ["model_name", "engine", "finished_reason"],
            registry=r,
        )
        self.success = {reason: success.labels(finished_reason=reason, **lv) for reason in FINISHED_REASONS}
        self.req_prompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", _TOKENS_BUCKETS)
        self.req_gen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", _TOKENS_BUCKETS)
        self.iteration = hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION_BUCKETS
        )
        self.max_tokens = hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", _TOKENS_BUCKETS
        )
        self.ttft = hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _TTFT_BUCKETS
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", _ITL_BUCKETS
        )
        self.tpot = hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            _ITL_BUCKETS,
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", _LATENCY_BUCKETS
        )
        self.queue = hist(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _LATENCY_BUCKETS
        )
        self.inference = hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            _LATENCY_BUCKETS,
        )
        self.prefill_time = hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            _LATENCY_BUCKETS,
        )
        self.decode_time = hist(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", _LATENCY_BUCKETS
        )
        # The simulator's own timing, not vLLM's: a client reads how far behind its schedule
        # the engine loop ran (host too busy for the clock speed) from the two counters'
        # deltas over a run. Real seconds.
        self.step_seconds = counter(STEP_SECONDS, "Simulator only: scheduled engine step time, real seconds.")
        self.lag_seconds = counter(
            LAG_SECONDS, "Simulator only: how late engine steps ended behind their schedule, real seconds."
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def set_queue(self, running: int, waiting: int, kv_usage: float) -> None:
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv_usage.set(kv_usage)

    # -- StatsSink -----------------------------------------------------------------------
    def on_admitted(self, req: SimRequest, now: float) -> None:
        self.queue.observe(max(0.0, (req.scheduled_at or now) - req.arrival))

    def on_step(
        self, emissions: list[Emission], num_tokens: int, spec: tuple[int, int, int, list[int]] | None, now: float
    ) -> None:
        self.iteration.observe(num_tokens)
        generated = 0
        for em in emissions:
            n = len(em.pieces)
            generated += n
            req = em.request
            if req.generated == n:  # this step produced the first token
                self.ttft.observe(now - req.arrival)
                self.prompt_tokens.inc(req.prompt_tokens)
            else:
                self.itl.observe(now - (req.prev_chunk_at or now))
            req.prev_chunk_at = now
        if generated:
            self.generation_tokens.inc(generated * self.counter_scale)
        if spec and self.spec_enabled:
            d, dt, a, per_pos = spec
            if d:
                self.drafts.inc(d)
                self.draft_tokens.inc(dt)
                self.accepted.inc(a)
                for child, v in zip(self.per_pos, per_pos):
                    if v:
                        child.inc(v)

    def on_finished(self, req: SimRequest, now: float) -> None:
        self.success[req.finish_reason].inc()
        self.req_prompt.observe(req.prompt_tokens)
        self.req_gen.observe(req.generated)
        self.max_tokens.observe(req.max_tokens)
        self.e2e.observe(now - req.arrival)
        start = req.scheduled_at if req.scheduled_at is not None else req.arrival
        first = req.first_token_at if req.first_token_at is not None else now
        self.inference.observe(now - start)
        self.prefill_time.observe(first - start)
        self.decode_time.observe(now - first)
        if req.generated > 1:
            self.tpot.observe((now - first) / (req.generated - 1))
