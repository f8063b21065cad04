"""Request arrival times as `vllm bench serve` draws them: gamma gaps of shape `burstiness`
(1: Poisson) and mean 1 / rate."""

from __future__ import annotations

import math

import numpy as np


def arrival_offsets(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Seconds after the start at which request i may be sent (all 0 for rate=inf)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not rate > 0:
        raise ValueError(f"request_rate must be > 0 (or inf for no pacing), got {rate}")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise ValueError(f"burstiness must be a finite number > 0, got {burstiness}")
    if math.isinf(rate):
        return [0.0] * n
    gaps = np.random.default_rng(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    # The first request goes at once; the others follow the drawn gaps.
    offsets = np.concatenate(([0.0], np.cumsum(gaps[:-1]))) if n else np.zeros(0)
    return [float(x) for x in offsets]
