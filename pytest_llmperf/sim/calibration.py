"""The seeds' published figures and the virtual-clock fit of the profiles to them: the
real scheduler with the seeds' workload, minimising squared log-ratios to the figures."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.profiles import Profile
from pytest_llmperf.sim.virtual import VirtualResult, run_virtual

MTP3 = {"method": "mtp", "num_speculative_tokens": 3}

# 5 % quantiles of ShareGPT prompt lengths (sim tokenizer) as the project's sampler draws them.
# fmt: off
SHAREGPT_PROMPT_QUANTILES = (4, 8, 11, 14, 17, 21, 27, 37, 53, 79, 122, 187, 254, 314, 373, 426, 501, 590, 717, 877,
                             1558)
# fmt: on


def synthetic_prompt_lens(n: int, seed: int = 0) -> list[int]:
    """Prompt lengths following the ShareGPT quantile table, at golden-ratio levels so
    every prefix of the list has close to the table's distribution."""
    q = SHAREGPT_PROMPT_QUANTILES
    phi = (math.sqrt(5) - 1) / 2
    start = random.Random(seed).random()
    out = []
    for i in range(n):
        u = ((start + i * phi) % 1.0) * (len(q) - 1)
        k = int(u)
        out.append(int(round(q[k] + (q[min(k + 1, len(q) - 1)] - q[k]) * (u - k))))
    return out


@dataclass(frozen=True)
class SeedTarget:
    """One published figure of a seed configuration."""

    model: str
    speculative: bool
    concurrency: int
    num_prompts: int
    max_seconds: float | None
    metric: str  # "decode_tok_s", "tpot_median_ms", "ttft_median_ms"
    published: float
    source: str

    @property
    def label(self) -> str:
        return f"{self.model.split('/')[-1]} {'MTP k=3' if self.speculative else 'base'} conc {self.concurrency}"


A3B, D27 = "Qwen/Qwen3.6-35B-A3B-FP8", "Qwen/Qwen3.6-27B-FP8"
SEED_TARGETS: tuple[SeedTarget, ...] = (
    SeedTarget(A3B, False, 32, 1000, None, "decode_tok_s", 286.0, "35B-A3B MTP seed: base 286.0"),
    SeedTarget(A3B, True, 32, 1000, None, "decode_tok_s", 407.9, "35B-A3B MTP seed: 407.9 (1000/1000 in 627 s)"),
    SeedTarget(D27, False, 32, 1000, None, "decode_tok_s", 155.0, "35B-A3B seed notes: dense 27B base 155"),
    SeedTarget(D27, True, 32, 1000, None, "decode_tok_s", 241.0, "27B conc-8 seed notes: conc-32 run 241"),
    SeedTarget(D27, True, 8, 500, 300.0, "decode_tok_s", 97.96, "27B MTP conc-8 seed (118/500, 300 s cap)"),
    SeedTarget(D27, True, 8, 500, 300.0, "tpot_median_ms", 66.3, "27B MTP conc-8 seed"),
    SeedTarget(D27, True, 8, 500, 300.0, "ttft_median_ms", 624.0, "27B MTP conc-8 seed"),
)
SEED_ACCEPTANCE = {A3B: (0.84, 0.66, 0.51), D27: (0.86, 0.69, 0.53)}


def seed_config(target: SeedTarget, profile: Profile | None = None, **overrides: Any) -> SimConfig:
    return SimConfig(
        model=target.model,
        max_num_seqs=target.concurrency,
        max_model_len=65536,
        speculative_config=dict(MTP3) if target.speculative else None,
        profile=profile,
        **overrides,
    )


def metric_value(result: VirtualResult, metric: str) -> float:
    if metric == "decode_tok_s":
        return result.decode_tok_s
    if metric == "tpot_median_ms":
        return result.tpot_median * 1000
    if metric == "ttft_median_ms":
        return result.ttft_median * 1000
    raise ValueError(f"unknown metric {metric!r}")


def simulate_target(
    target: SeedTarget,
    prompt_lens: list[int],
    profile: Profile | None = None,
    num_prompts: int | None = None,
    capped: bool = True,
    prompts: list[str] | None = None,
) -> VirtualResult:
    """The seed's run on a virtual clock (capped=False: without its time cap)."""
    return run_virtual(
        seed_config(target, profile),
        prompt_lens,
        target.concurrency,
        max_tokens=256,
        num_prompts=num_prompts or target.num_prompts,
        max_seconds=target.max_seconds if capped else None,
        prompts=prompts,
    )


def fit_profile(
    start: Profile,
    targets: list[SeedTarget],
    prompt_lens: list[int],
    free: tuple[str, ...] = ("step_base_s", "per_token_s", "prefill_per_token_s", "draft_step_s", "acceptance_spread"),
    tied: Callable[[Profile], Profile] | None = None,
    num_prompts: int | None = None,
    max_evals: int = 300,
    log: Callable[[str], None] = lambda s: None,
) -> Profile:
    """Minimise the squared log-ratios over the `free` fields of `start` (log space;
    Nelder-Mead with scipy, else a pattern search); `tied` derives dependent fields."""
    cache: dict[tuple[float, ...], float] = {}

    def build(x: Sequence[float]) -> Profile:
        # `free` names float fields of Profile at run time: no static check of the names
        changes: dict[str, Any] = {name: math.exp(v) for name, v in zip(free, x)}
        p = replace(start, **changes)
        return tied(p) if tied else p

    def loss(x: Sequence[float]) -> float:
        key = tuple(round(float(v), 6) for v in x)
        if key not in cache:
            prof = build(x)
            runs: dict[tuple[bool, int], VirtualResult] = {}
            total = 0.0
            for t in targets:
                rk = (t.speculative, t.concurrency)
                if rk not in runs:
                    runs[rk] = simulate_target(t, prompt_lens, prof, num_prompts)
                total += math.log(metric_value(runs[rk], t.metric) / t.published) ** 2
            cache[key] = total
            if len(cache) % 10 == 0:
                log(f"  eval {len(cache)}: loss {min(cache.values()):.5f}")
        return cache[key]

    x0 = [math.log(getattr(start, name)) for name in free]
    try:
        from scipy.optimize import minimize
    except ImportError:
        minimize = None
    if minimize is not None:
        res = minimize(
            loss,
            x0,
            method="Nelder-Mead",
            options={"maxfev": max_evals, "xatol": 1e-3, "fatol": 1e-6, "initial_simplex": None},
        )
        return build(res.x)
    x, best, step = tuple(x0), loss(x0), 0.3
    while len(cache) < max_evals and step > 0.005:
        improved = False
        for i in range(len(x)):
            for sign in (1, -1):
                y = list(x)
                y[i] += sign * step
                if loss(y) < best:
                    x, best, improved = tuple(y), loss(y), True
        if not improved:
            step /= 2
    return build(x)
