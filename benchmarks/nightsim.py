"""A virtual-clock server target and runner that the real PerfSession accepts.

`VirtualTarget` is a ServerTarget whose endpoints run nothing: each start of a server
draws its noise (a `StartNoise`, from a callable the caller gives) and puts it in the
endpoint's provenance with the server's `vllm serve` argv and its simulator flags (the
spec's sim_args, as the simulated target passes them: a paired session's OLD and NEW
flags travel there). `VirtualRunner` is a Runner:
for each measured run it builds the simulator's SimConfig from that argv (exactly as the
simulated target does, at speed 1), applies the start's noise for the run's concurrency,
steps the simulator's engine on its virtual clock (sim/virtual.run_virtual: the closed-loop
client the plugin's runner is, with its time cap and grace) on the run's own prompts, and
returns a real RunResult: one RequestRecord per request sent (chunk times, usage counts,
finish reason; requests cut at the cap marked as the runner marks them) and the /metrics
pages before and after the run, rendered by the simulator's own exposition
(sim/metrics.VllmMetrics) with the run's counter deltas. Every figure (steady decode,
TPOT, TTFT, acceptance from the spec-decode counters, the token account) is then computed
by the session, as from an HTTP run.

What this leaves out, against a run over HTTP: no warm-up requests are simulated (the
engine starts each run idle and without state that would change its timing, and the
warm-up's prompts are distinct), the server's running gauge is not sampled (the
concurrency check is not made), the client's lag is not probed, and replies carry no text
(the output canary compares empty texts; lengths and finish reasons are real).
benchmarks/virtual_vs_http.py measures how far the virtual clock's figures are from HTTP's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.metrics import VllmMetrics
from pytest_llmperf.sim.virtual import VirtualResult, run_virtual
from pytest_llmperf.workload.config import RunConfig
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import RunResult
from pytest_llmperf.workload.workload import Workload

# The provenance key an endpoint's noise travels under.
NOISE_KEY = "sim_noise"
ARGV_KEY = "sim_argv"


@dataclass(frozen=True)
class StartNoise:
    """One server start's draw: the factor on every step cost of its runs, by concurrency
    (the box's shift, the spread between starts and a slow start folded together), the
    factor on its per-position acceptance rates, and simulator flags a change brings
    (`--sim-prefill-time-scale 1.1`)."""

    step: Mapping[int, float] = field(default_factory=dict)  # concurrency -> factor; none given: 1
    acceptance: float = 1.0
    sim_args: tuple[str, ...] = ()

    def step_at(self, concurrency: int) -> float:
        """The step factor at `concurrency`: the draw's own where it has one, else log-linear
        in log concurrency between the draws on either side (the nearest beyond the ends), so
        a capacity probe at 20 users shares the night's shift and the starts' spread."""
        if concurrency in self.step or not self.step:  # the draw's own, to the bit
            return self.step.get(concurrency, 1.0)
        keys = sorted(self.step)
        logs = np.log([self.step[c] for c in keys])
        return float(np.exp(np.interp(np.log(concurrency), np.log(keys), logs)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": {str(c): f for c, f in sorted(self.step.items())},
            "acceptance": self.acceptance,
            "sim_args": list(self.sim_args),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StartNoise:
        return cls(
            {int(c): float(f) for c, f in d.get("step", {}).items()},
            float(d.get("acceptance", 1.0)),
            tuple(d.get("sim_args", ())),
        )


QUIET = StartNoise()
# What a target asks for each start: (server, how many starts of it came before) -> its draw.
Draw = Callable[[ServerSpec, int], StartNoise]


class VirtualTarget:
    """A ServerTarget whose servers are virtual: a start costs nothing and says, in its
    endpoint's provenance, the server's argv (its sim_args included) and the noise `draw`
    gave that start."""

    name = "sim"
    starts_servers = True

    def __init__(self, draw: Draw = lambda spec, start: QUIET) -> None:
        self.draw = draw
        self.starts: dict[str, int] = {}  # server name -> starts so far
        self.events: list[tuple[str, str]] = []

    @contextmanager
    def start(self, spec: ServerSpec) -> Iterator[Endpoint]:
        count = self.starts.get(spec.name, 0)
        self.starts[spec.name] = count + 1
        noise = self.draw(spec, count)
        self.events.append(("start", spec.name))
        provenance = {
            "vllm_version": "virtual",
            "simulator": True,
            ARGV_KEY: [*spec.vllm_args(host="127.0.0.1", port=0), *spec.sim_args],
            NOISE_KEY: noise.to_dict(),
            "sim_args": list(spec.sim_args),
        }
        try:
            yield Endpoint(f"virtual://{spec.name}/{count}", spec.model_id, self.name, provenance)
        finally:
            self.events.append(("stop", spec.name))


@functools.lru_cache(maxsize=64)
def _base_config(argv: tuple[str, ...]) -> SimConfig:
    return SimConfig.from_vllm_argv(list(argv))


def sim_config(endpoint: Endpoint, concurrency: int) -> SimConfig:
    """The simulator's config of `endpoint`'s server for a run at `concurrency`: its argv
    as the simulated target passes it, at speed 1, with the start's noise applied."""
    noise = StartNoise.from_dict(endpoint.provenance.get(NOISE_KEY) or {})
    base = _base_config((*endpoint.provenance[ARGV_KEY], *noise.sim_args))
    return dataclasses.replace(
        base,
        step_time_scale=base.step_time_scale * noise.step_at(concurrency),
        acceptance_scale=min(10.0, base.acceptance_scale * noise.acceptance),
    )


class VirtualRunner:
    """A Runner on the simulator's virtual clock (see the module's docstring). Counts the
    runs it made and the simulated GPU seconds they took."""

    def __init__(self) -> None:
        self.runs = 0
        self.gpu_seconds = 0.0

    def measure(
        self, endpoint: Endpoint, requests: list[SampledRequest], workload: Workload, speed: float, label: str = ""
    ) -> RunResult:
        config = dataclasses.replace(workload.run_config(clock_speed=speed, progress=False), label=label)
        measured = list(requests[: config.num_prompts] if config.num_prompts else requests)
        sim = sim_config(endpoint, workload.concurrency)
        max_tokens = config.max_tokens if config.max_tokens is not None else workload.max_tokens
        result = run_virtual(
            sim,
            [q.prompt_len for q in measured],
            config.concurrency,
            max_tokens,
            num_prompts=len(measured),
            max_seconds=config.max_seconds,
            ignore_eos=config.ignore_eos,
            prompts=[q.prompt for q in measured],
            grace_seconds=config.grace_seconds,
        )
        self.runs += 1
        self.gpu_seconds += result.duration
        return run_result(result, measured, config, sim, endpoint.model, speed)

    def warmup(self, endpoint: Endpoint, prompts: list[SampledRequest], config: RunConfig) -> dict[str, float] | None:
        return None  # a virtual engine has nothing to warm


def run_result(
    r: VirtualResult, measured: list[SampledRequest], config: RunConfig, sim: SimConfig, model: str, speed: float
) -> RunResult:
    """`r` as the plugin's runner would have recorded it: its records in send order, and
    the /metrics pages around it."""
    max_tokens = config.max_tokens or 0
    records: dict[int, RequestRecord] = {}  # by position in the prompts sent
    for (i, prompt_tokens, generated, _, _, _), (sent, end, chunks, _) in zip(r.rows, r.spans):
        records[i] = RequestRecord(
            index=measured[i].index,
            send_time=sent,
            chunk_times=list(chunks),
            end_time=end,
            prompt_tokens=prompt_tokens,
            completion_tokens=generated,
            # the engine stops a request at max_tokens ("length") or at its EOS ("stop")
            finish_reason="length" if config.ignore_eos or generated >= max_tokens else "stop",
            status=200,
            expected_prompt_len=measured[i].prompt_len,
        )
    sent_count = len(r.rows) + len(r.cut_spans)
    cut_indices = [i for i in range(sent_count) if i not in records]  # the cut ones, in send order as cut_spans
    cap = config.max_seconds or 0.0
    for i, (sent, _, chunks, _) in zip(cut_indices, r.cut_spans):
        records[i] = RequestRecord(
            index=measured[i].index,
            send_time=sent,
            chunk_times=list(chunks),
            end_time=r.duration,
            status=200,
            error=f"cut: still running {config.grace_seconds:g} s after the {cap:g} s cap",
            expected_prompt_len=measured[i].prompt_len,
            cut_at_cap=True,
        )
    generated = r.output_tokens + sum(g for *_, g in r.cut_spans)
    # prefilled (a first token came): the engine counted their prompts
    prompt_tokens = sum(max(1, measured[i].prompt_len) for i, rec in records.items() if rec.chunk_times)
    before, after = metrics_pages(r, sim, model, generated, prompt_tokens)
    capped = sent_count < len(measured) or bool(r.cut_spans)
    return RunResult(
        config=config.as_dict(),
        records=[records[i] for i in sorted(records)],  # in dispatch order, as the runner keeps them
        duration=r.duration,
        attempted=sent_count,
        stop_reason="max_seconds" if capped else "completed",
        metrics_before=before,
        metrics_after=after,
        clock_speed=speed,
    )


def metrics_pages(r: VirtualResult, sim: SimConfig, model: str, generated: int, prompt_tokens: int) -> tuple[str, str]:
    """A fresh server's /metrics page, and the page after the run: the simulator's own
    families (sim/metrics.py) with the run's spec-decode, token and step counters added."""
    metrics = VllmMetrics(model, sim.num_speculative_tokens, counter_scale=sim.counter_scale)
    before = metrics.render().decode()
    counters = metrics.counters
    if metrics.spec_enabled and r.drafts:
        counters["drafts"].inc(r.drafts)
        counters["draft_tokens"].inc(r.draft_tokens)
        counters["accepted"].inc(r.accepted)
        for child, count in zip(metrics.per_pos, r.accepted_per_pos):
            if count:
                child.inc(count)
    if generated:
        counters["generation_tokens"].inc(generated * sim.counter_scale)
    if prompt_tokens:
        counters["prompt_tokens"].inc(prompt_tokens)
    counters["step_seconds"].inc(r.duration)  # the engine kept its schedule: no lag on a virtual clock
    return before, metrics.render().decode()
