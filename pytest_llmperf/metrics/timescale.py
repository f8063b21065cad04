"""Scale figures measured on a sped-up clock (the simulator) back to real time."""

from __future__ import annotations

from typing import Any


def to_real_time(metrics: dict[str, Any], clock_speed: float) -> dict[str, Any]:
    """A simulator `clock_speed` times faster than real shortens every duration and
    raises every rate by that factor; undo it so the figures read like a GPU's.
    Ratios (acceptance, speedup) and counts are left alone."""
    if clock_speed == 1.0:
        return dict(metrics)
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            out[key] = value
        elif "_ms_" in key or (key.endswith(("_ms", "_s")) and not key.endswith("tok_s")):
            out[key] = value * clock_speed
        elif key.endswith(("tok_s", "throughput")):
            out[key] = value / clock_speed
        else:
            out[key] = value
    return out
