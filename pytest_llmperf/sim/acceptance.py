"""Per-position draft acceptance: from configured survival rates S to per-step draws with
conditionals S[i] / S[i-1]. A per-request logit shift spreads requests; `solve_base_logits`
keeps the run-wide (draft-weighted) rates at the configured ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

_EPS = 1e-6


def extend_rates(rates: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Survival rates for k positions: truncated, or extended with the last decay ratio."""
    rates = tuple(rates)
    if k <= len(rates):
        return rates[:k]
    out = list(rates)
    ratio = rates[-1] / rates[-2] if len(rates) >= 2 and rates[-2] > 0 else rates[-1]
    while len(out) < k:
        out.append(out[-1] * ratio)
    return tuple(out)


def scaled_rates(rates: tuple[float, ...], scale: float) -> tuple[float, ...]:
    """Rates times the regression scale, kept in [0, 1] and non-increasing."""
    out: list[float] = []
    for r in rates:
        v = min(1.0, max(0.0, r * scale))
        out.append(min(v, out[-1]) if out else v)
    return tuple(out)


def conditionals(survival: tuple[float, ...]) -> list[float]:
    cond, prev = [], 1.0
    for s in survival:
        cond.append(0.0 if prev <= 0 else min(1.0, s / prev))
        prev = s
    return cond


def _logit(p: float) -> float:
    p = min(1 - _EPS, max(_EPS, p))
    return math.log(p / (1 - p))


def _sigmoid(x: NDArray[Any]) -> NDArray[Any]:
    y: NDArray[Any] = 1.0 / (1.0 + np.exp(-x))
    return y


def solve_base_logits(survival: tuple[float, ...], spread: float, iters: int = 200) -> list[float]:
    """Logits of the conditional rates before the per-request shift (see module doc)."""
    target = conditionals(survival)
    logits = np.array([_logit(c) for c in target])
    if spread <= 0 or not target:
        return list(logits)
    z, w = np.polynomial.hermite_e.hermegauss(41)  # nodes/weights for N(0, 1)
    w = w / w.sum()
    goal = np.array([_logit(c) for c in target])
    for _ in range(iters):
        cond = _sigmoid(logits[None, :] + spread * z[:, None])  # [nodes, k]
        surv = np.cumprod(cond, axis=1)
        drafts = w / (1.0 + surv.sum(axis=1))  # steps per token
        agg = (drafts[:, None] * surv).sum(axis=0) / drafts.sum()
        agg_cond = np.array(conditionals(tuple(agg)))
        err = goal - np.array([_logit(c) for c in agg_cond])
        logits = logits + err
        if np.max(np.abs(err)) < 1e-9:
            break
    return list(logits)


def request_conditionals(base_logits: list[float], shift: float) -> tuple[float, ...]:
    """One request's conditional acceptance probabilities."""
    out = []
    for lg in base_logits:
        if lg <= _logit(0) + 1e-9:
            out.append(0.0)
        elif lg >= _logit(1) - 1e-9 and shift >= 0:
            out.append(1.0)
        else:
            out.append(1.0 / (1.0 + math.exp(-(lg + shift))))
    return tuple(out)
