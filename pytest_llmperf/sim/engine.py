"""The engine's scheduler and timing model, independent of any clock: `plan()` costs the
next step, the caller lets that time pass (really or virtually) and calls `complete()`, so
the calibrated model and the served one are the same code.
"""

from __future__ import annotations

import math
import random
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from pytest_llmperf.sim.acceptance import (
    extend_rates,
    request_conditionals,
    scaled_rates,
    solve_base_logits,
)
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.tokenizer import TextGenerator


@dataclass(eq=False)
class SimRequest:
    rid: str
    prompt_tokens: int
    max_tokens: int
    target_len: int  # tokens this request will generate
    finish_reason: str  # "length" or "stop" (the last token is EOS then)
    arrival: float
    rng: random.Random  # acceptance draws
    text: TextGenerator
    cond: tuple[float, ...] = ()  # per-position conditional acceptance (empty: no spec)
    reasoning_len: int | None = None  # reasoning tokens before `</think>`; None: no reasoning phase
    prefilled: int = 0
    generated: int = 0
    scheduled_at: float | None = None
    first_token_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    prev_chunk_at: float | None = None  # for the inter-token latency histogram
    aborted: bool = False

    @property
    def in_prefill(self) -> bool:
        return self.prefilled < self.prompt_tokens

    @property
    def done(self) -> bool:
        return self.generated >= self.target_len

    @property
    def reasoning_tokens(self) -> int | None:
        """Reasoning tokens generated so far (vLLM's usage count); None without a reasoning phase."""
        return None if self.reasoning_len is None else min(self.reasoning_len, self.generated)


@dataclass
class Emission:
    request: SimRequest
    pieces: list[str]  # token strings emitted by this step ("" for EOS)
    finished: bool
    start: int = 0  # position of the first of them in the reply


@dataclass
class StepPlan:
    duration: float
    prefill: list[tuple[SimRequest, int]] = field(default_factory=list)
    decode: list[SimRequest] = field(default_factory=list)
    admitted: list[SimRequest] = field(default_factory=list)


class StatsSink(Protocol):
    def on_admitted(self, req: SimRequest, now: float) -> None: ...
    def on_step(
        self, emissions: list[Emission], num_tokens: int, spec: tuple[int, int, int, list[int]] | None, now: float
    ) -> None: ...
    def on_finished(self, req: SimRequest, now: float) -> None: ...


def run_factors(config: SimConfig) -> tuple[float, float]:
    """This server start's (step-time factor, acceptance factor): 1.0 each without noise."""
    if not (config.run_noise or config.acceptance_noise):
        return 1.0, 1.0
    seed = config.noise_seed if config.noise_seed is not None else random.SystemRandom().getrandbits(63)
    rng = random.Random(f"run-noise:{seed}")
    step = math.exp(rng.gauss(0.0, config.run_noise)) if config.run_noise else 1.0
    acceptance = max(0.0, 1.0 + rng.gauss(0.0, config.acceptance_noise)) if config.acceptance_noise else 1.0
    return step, acceptance


class Engine:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.profile = p = config.resolved_profile
        self.k = config.num_speculative_tokens
        self.run_factors = run_factors(config)
        step_factor, acceptance_factor = self.run_factors
        cost_scale = config.step_time_scale * step_factor / config.speed
        self._base_s = p.step_base_s * cost_scale
        self._tok_s = p.per_token_s * cost_scale
        self._prefill_s = p.prefill_per_token_s * cost_scale * config.prefill_time_scale
        self._draft_s = p.draft_step_s * cost_scale * self.k
        self._prefill_budget = p.max_prefill_tokens_per_step if config.prefill_budget is None else config.prefill_budget
        self._prefill_seqs = config.max_num_seqs if config.max_prefill_seqs is None else config.max_prefill_seqs
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.stats: list[StatsSink] = []
        self.spread = p.acceptance_spread if config.acceptance_spread is None else config.acceptance_spread
        if self.k:
            rates = scaled_rates(extend_rates(p.acceptance, self.k), config.acceptance_scale * acceptance_factor)
            self.survival = rates
            self._base_logits = solve_base_logits(rates, self.spread)
        else:
            self.survival = ()
            self._base_logits = []
        self._seen: dict[int, int] = {}  # prompt hash -> occurrences, for distinct draws
        self._kv_tokens = 0

    # -- requests ------------------------------------------------------------------------
    def make_request(
        self,
        rid: str,
        prompt: str,
        prompt_tokens: int,
        max_tokens: int,
        ignore_eos: bool,
        now: float,
        temperature: float = 0.0,
        reasoning: bool = False,
    ) -> SimRequest:
        """A request whose output derives from the prompt: greedy, the same text and length
        every time; sampled, its own per occurrence. Acceptance draws are per occurrence.
        `reasoning` labels the first `reasoning_share` of it reasoning, timing unchanged."""
        h = zlib.crc32(prompt.encode("utf-8", "surrogatepass"))
        n = self._seen.get(h, 0)
        if len(self._seen) > 1_000_000:
            self._seen.clear()
        self._seen[h] = n + 1
        seed = self.config.seed
        draws = random.Random(f"{seed}:{h}:{n}")  # per occurrence: acceptance draws
        shape = random.Random(f"{seed}:{h}" if temperature <= 0 else f"{seed}:{h}:{n}:sampled")
        log_len = math.log(self.profile.output_len_median) + self.profile.output_len_sigma * shape.gauss(0.0, 1.0)
        natural = max(1, int(round(math.exp(log_len))))
        shift = self.spread * shape.gauss(0.0, 1.0)
        if ignore_eos or natural >= max_tokens:
            target, reason = max_tokens, "length"
        else:
            target, reason = natural, "stop"
        occurrence = f":{n}" if temperature > 0 else ""  # sampled: each occurrence draws its own
        if self.config.eos_only_rate and not ignore_eos:
            # its own draw, so that the other draws stay as they were without the knob
            if random.Random(f"{seed}:{h}{occurrence}:eos").random() < self.config.eos_only_rate:
                target, reason = 1, "stop"  # the reply is one EOS token
        if self.config.early_stop_rate and not ignore_eos and target > 1:
            if random.Random(f"{seed}:{h}{occurrence}:early").random() < self.config.early_stop_rate:
                target, reason = max(1, target // 2), "stop"  # EOS at half the length
        text_seed = shape.getrandbits(32)
        if self.config.changed_output_rate:
            if random.Random(f"{seed}:{h}{occurrence}:changed").random() < self.config.changed_output_rate:
                text_seed ^= 0x5A5A5A5A  # other text, same length and timing
        reasoning_len = None
        share = self.config.resolved_reasoning_share if reasoning else None
        if share is not None:
            # At least one answer token before EOS: reasoning, </think>, "\n\n", answer, EOS.
            eos_only = target == 1 and reason == "stop"
            reasoning_len = 0 if eos_only else max(0, min(int(share * natural), natural - 4))
        return SimRequest(
            rid=rid,
            prompt_tokens=max(1, prompt_tokens),
            max_tokens=max_tokens,
            target_len=max(1, target),
            finish_reason=reason,
            arrival=now,
            rng=draws,
            text=TextGenerator(text_seed),
            cond=request_conditionals(self._base_logits, shift) if self.k else (),
            reasoning_len=reasoning_len,
        )

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        """The client went away: free its slot at the next step."""
        req.aborted = True

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def kv_usage(self) -> float:
        return min(1.0, self._kv_tokens / self.profile.kv_cache_tokens)

    # -- steps ---------------------------------------------------------------------------
    def plan(self, now: float) -> StepPlan | None:
        """Admit waiting requests into free slots, then cost the next step; None when idle."""
        self.running = [r for r in self.running if not r.aborted]
        while self.waiting and self.waiting[0].aborted:
            self.waiting.popleft()
        admitted = []
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            req = self.waiting.popleft()
            if req.aborted:
                continue
            req.scheduled_at = now
            self.running.append(req)
            admitted.append(req)
        if not self.running:
            return None
        budget = self._prefill_budget
        prefill: list[tuple[SimRequest, int]] = []
        decode: list[SimRequest] = []
        for req in self.running:
            if req.in_prefill:
                if budget > 0 and len(prefill) < self._prefill_seqs:
                    n = min(budget, req.prompt_tokens - req.prefilled)
                    budget -= n
                    prefill.append((req, n))
            else:
                decode.append(req)
        n_prefill = sum(n for _, n in prefill)
        duration = self._base_s + self._tok_s * len(decode) * (1 + self.k) + self._prefill_s * n_prefill
        if decode and self.k:
            duration += self._draft_s
        return StepPlan(duration=duration, prefill=prefill, decode=decode, admitted=admitted)

    def complete(self, step: StepPlan, now: float) -> list[Emission]:
        """Apply a finished step: emit tokens, draw acceptance, retire finished requests."""
        for req in step.admitted:
            for s in self.stats:
                s.on_admitted(req, now)
        out: list[Emission] = []
        num_tokens = 0
        drafts = draft_tokens = accepted = 0
        per_pos = [0] * self.k
        for req, n in step.prefill:
            if req.aborted:
                continue
            req.prefilled += n
            num_tokens += n
            if not req.in_prefill:  # prefill done: the step also samples token 1
                out.append(self._emit(req, 1, now))
        k = self.k
        for req in step.decode:
            if req.aborted:
                continue
            if k:
                a = 0
                rnd = req.rng.random
                for c in req.cond:
                    if rnd() < c:
                        per_pos[a] += 1
                        a += 1
                    else:
                        break
                drafts += 1
                draft_tokens += k
                accepted += a
                n = 1 + a
            else:
                n = 1
            num_tokens += 1 + k
            out.append(self._emit(req, n, now))
        finished = [e.request for e in out if e.finished]
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
        self._kv_tokens = sum(r.prefilled + r.generated for r in self.running)
        spec = (drafts, draft_tokens, accepted, per_pos) if k else None
        for s in self.stats:
            s.on_step(out, num_tokens, spec, now)
            for req in finished:
                s.on_finished(req, now)
        return out

    def _emit(self, req: SimRequest, n: int, now: float) -> Emission:
        n = min(n, req.target_len - req.generated)
        pieces = [req.text.next_piece() for _ in range(n)]
        start = req.generated
        req.generated += n
        if req.first_token_at is None:
            req.first_token_at = now
        req.last_token_at = now
        finished = req.done
        if finished:
            req.finished_at = now
            if req.finish_reason == "stop":
                pieces[-1] = ""  # EOS: counted as a token, has no text
        return Emission(req, pieces, finished, start)
