"""Quantiles of the normal and Student's t distributions."""

from __future__ import annotations

import math
import statistics


def z_value(confidence: float, dof: float | None = None) -> float:
    """One-sided quantile of the confidence (each claim of the rule points one way): normal
    (0.95 -> 1.645), or Student's t on `dof` degrees of freedom (2 -> 2.92)."""
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    p = confidence
    if dof is None or not math.isfinite(dof) or dof > 1e6:
        return statistics.NormalDist().inv_cdf(p)
    return t_quantile(p, max(float(dof), 1.0))


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher
    expansion around the normal quantile (within 0.3 % of the exact value from 3 up)."""
    if dof <= 1:
        return math.tan(math.pi * (p - 0.5))
    if dof <= 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z = statistics.NormalDist().inv_cdf(p)
    v = dof
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )
