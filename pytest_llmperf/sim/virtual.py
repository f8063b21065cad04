"""A closed-loop benchmark of the engine on a virtual clock (instant, deterministic), for
fitting profiles and for tests; the client behaves like the plugin's runner."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.engine import Emission, Engine, SimRequest


@dataclass
class VirtualResult:
    completed: int
    duration: float
    output_tokens: int
    prompt_tokens: int
    ttfts: list[float]
    tpots: list[float]
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    # Per finished request, in send order, as metrics.uncertainty.request_rows has them.
    rows: list[tuple[int, int, int, int, float, float]] = field(default_factory=list)
    # Per finished request, in send order, as metrics.steady.steady_tok_s takes them.
    spans: list[tuple[float, float, list[float], int]] = field(default_factory=list)
    cut_spans: list[tuple[float, float, list[float], int]] = field(default_factory=list)  # cut at the cap

    @property
    def decode_tok_s(self) -> float:
        return self.output_tokens / self.duration if self.duration else 0.0

    @property
    def prefill_tok_s(self) -> float:
        return self.prompt_tokens / self.duration if self.duration else 0.0

    @property
    def ttft_median(self) -> float:
        return statistics.median(self.ttfts) if self.ttfts else math.nan

    @property
    def tpot_median(self) -> float:
        return statistics.median(self.tpots) if self.tpots else math.nan

    @property
    def per_position(self) -> list[float]:
        return [a / self.drafts for a in self.accepted_per_pos] if self.drafts else []

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else math.nan


class _Counter:
    def __init__(self) -> None:
        self.drafts = self.draft_tokens = self.accepted = 0
        self.per_pos: list[int] = []

    def on_admitted(self, req: SimRequest, now: float) -> None:
        pass

    def on_step(
        self, emissions: list[Emission], num_tokens: int, spec: tuple[int, int, int, list[int]] | None, now: float
    ) -> None:
        if spec:
            d, dt, a, pp = spec
            self.drafts += d
            self.draft_tokens += dt
            self.accepted += a
            if not self.per_pos:
                self.per_pos = [0] * len(pp)
            for i, v in enumerate(pp):
                self.per_pos[i] += v

    def on_finished(self, req: SimRequest, now: float) -> None:
        pass


def _token_times(req: SimRequest) -> tuple[float, float]:
    """(first token, last token) of a finished request: the engine sets both as it emits."""
    first, last = req.first_token_at, req.last_token_at
    if first is None or last is None:
        raise RuntimeError(f"request {req.rid} finished without emitting a token")
    return first, last


def run_virtual(
    config: SimConfig,
    prompt_lens: list[int],
    concurrency: int,
    max_tokens: int,
    num_prompts: int | None = None,
    max_seconds: float | None = None,
    ignore_eos: bool = False,
    prompts: list[str] | None = None,
    grace_seconds: float | None = None,
) -> VirtualResult:
    """Run the closed-loop client against the engine on a virtual clock. `prompts`: the
    texts behind `prompt_lens` (outputs derive from them); `grace_seconds`: requests
    still running that long after `max_seconds` are cut (None: all finish)."""
    total = min(num_prompts or len(prompt_lens), len(prompt_lens))
    client = _Client(Engine(config), prompt_lens, prompts, max_tokens, ignore_eos)
    for _ in range(min(concurrency, total)):
        client.send()
    cut_at = max_seconds + grace_seconds if max_seconds is not None and grace_seconds is not None else math.inf
    client.run(total, max_seconds, cut_at)
    return client.result()


class _Client:
    """The closed-loop client's state: the requests it sent, those that finished, and
    the virtual time of every chunk each one received."""

    def __init__(
        self, engine: Engine, prompt_lens: list[int], prompts: list[str] | None, max_tokens: int, ignore_eos: bool
    ) -> None:
        self.engine, self.prompt_lens, self.prompts = engine, prompt_lens, prompts
        self.max_tokens, self.ignore_eos = max_tokens, ignore_eos
        self.counter = _Counter()
        engine.stats.append(self.counter)
        self.now = 0.0
        self.requests: list[SimRequest] = []  # sent, in order
        self.pending: list[SimRequest] = []  # sent, not yet in the engine
        self.done: list[SimRequest] = []
        self.chunks: dict[str, list[float]] = {}

    def send(self) -> None:
        i = len(self.requests)
        plen = self.prompt_lens[i]
        text = self.prompts[i] if self.prompts is not None else f"prompt-{i}-{plen}"
        req = self.engine.make_request(f"v{i}", text, plen, self.max_tokens, self.ignore_eos, self.now)
        self.pending.append(req)
        self.requests.append(req)

    def hand_over(self) -> None:
        for req in self.pending:
            self.engine.add(req)
        self.pending.clear()

    def run(self, total: int, max_seconds: float | None, cut_at: float) -> None:
        """Step the engine until every request finished or the clock reached `cut_at`; a
        finished request's client sends the next prompt while `max_seconds` allows."""
        engine = self.engine
        while (self.pending or engine.has_work) and self.now < cut_at:
            if not engine.has_work:  # idle engine: the request starts at once
                self.hand_over()
            step = engine.plan(self.now)
            # A next request arrives after the engine started its next step (as over HTTP).
            self.hand_over()
            if step is None:
                continue
            if self.now + step.duration > cut_at:  # the runner cuts what still runs: this step's tokens never arrive
                self.now = cut_at
                break
            self.now += step.duration
            for em in engine.complete(step, self.now):
                self.chunks.setdefault(em.request.rid, []).append(self.now)
                if em.finished:
                    self.done.append(em.request)
                    if len(self.requests) < total and (max_seconds is None or self.now < max_seconds):
                        self.send()

    def result(self) -> VirtualResult:
        done, chunks = self.done, self.chunks
        finished = {r.rid for r in done}
        cut = [r for r in self.requests if r.rid not in finished]
        cut_spans = [
            (r.arrival, (chunks.get(r.rid) or [r.arrival])[-1], chunks.get(r.rid, []), r.generated) for r in cut
        ]
        times = {r.rid: _token_times(r) for r in done}
        in_order = sorted(done, key=lambda r: (r.arrival, int(r.rid[1:])))
        rows = [
            (
                int(r.rid[1:]),
                r.prompt_tokens,
                r.generated,
                len(chunks.get(r.rid, [])),
                (times[r.rid][0] - r.arrival) * 1000.0,
                (times[r.rid][1] - r.arrival) * 1000.0,
            )
            for r in in_order
        ]
        counter = self.counter
        return VirtualResult(
            completed=len(done),
            duration=self.now,
            output_tokens=sum(r.generated for r in done),
            prompt_tokens=sum(r.prompt_tokens for r in done),
            ttfts=[times[r.rid][0] - r.arrival for r in done],
            tpots=[(times[r.rid][1] - times[r.rid][0]) / (r.generated - 1) for r in done if r.generated > 1],
            drafts=counter.drafts,
            draft_tokens=counter.draft_tokens,
            accepted=counter.accepted,
            accepted_per_pos=counter.per_pos,
            rows=rows,
            spans=[(r.arrival, times[r.rid][1], chunks.get(r.rid, []), r.generated) for r in in_order],
            cut_spans=cut_spans,
        )
