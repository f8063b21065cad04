"""Whether two runs are comparable: the same workload identity (every key, in full) on
the same hardware; and the messages that refuse a comparison or say where the entry went."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

# Hardware that makes numbers incomparable; the image and vLLM version are what the suite judges.
HARDWARE_KEYS = ("gpu_name", "gpu_count")


def _same(a: Any, b: Any) -> bool:
    """Equality that survives the store's rounding (6 significant digits) and 256 vs 256.0."""
    num = numbers.Real
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _show(value: Any, present: bool) -> str:
    if not present:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _differences(baseline: Mapping[str, Any], measured: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    out = []
    for key in keys:
        in_b, in_m = key in baseline, key in measured
        if in_b and in_m and _same(baseline[key], measured[key]):
            continue
        if not in_b and not in_m:
            continue
        out.append(f"{key}: baseline {_show(baseline.get(key), in_b)}, measured {_show(measured.get(key), in_m)}")
    return out


def hardware_of(info: Mapping[str, Any] | None) -> dict[str, Any]:
    """The comparability-relevant hardware keys of a provenance or hardware dict."""
    return {k: info[k] for k in HARDWARE_KEYS if info and k in info}


def check_compatible(
    baseline_workload: Mapping[str, Any],
    measured_workload: Mapping[str, Any],
    baseline_hw: Mapping[str, Any],
    measured_hw: Mapping[str, Any],
) -> list[str]:
    """Every difference that makes a baseline incomparable (every workload key, and
    HARDWARE_KEYS of the hardware dicts); empty means comparable."""
    baseline_workload = baseline_workload or {}
    measured_workload = measured_workload or {}
    keys = sorted(set(baseline_workload) | set(measured_workload))
    diffs = _differences(baseline_workload, measured_workload, keys)
    diffs += _differences(hardware_of(baseline_hw), hardware_of(measured_hw), HARDWARE_KEYS)
    return diffs


def other_workload_message(
    path: Any, concurrency: int, differences: list[str], update_command: str, others: int = 1
) -> str:
    """No entry for this workload, but `others` entries of other workloads at this
    concurrency: what differs from the nearest, and how to record this one beside them."""
    which = "its entry there was" if others == 1 else f"its {others} entries there were"
    lines = [
        f"baseline {path} has no entry for this workload at concurrency {concurrency}: {which} "
        "recorded under a different workload; nothing to compare with. Differences"
        + (" from the nearest:" if others > 1 else ":"),
    ]
    lines += [f"  - {d}" for d in differences]
    lines.append(
        f"Record this workload beside {'it' if others == 1 else 'them'} with: {update_command} "
        "(entries of other workloads are kept: delete one from the file once no test asks for it)"
    )
    return "\n".join(lines)


def incompatibility_message(path: Any, concurrency: int, differences: list[str], update_command: str) -> str:
    """The refusal text: what differs, and how to re-record deliberately."""
    lines = [
        f"baseline {path} (concurrency {concurrency}) was recorded under a different workload or hardware;",
        "refusing to compare. Differences:",
    ]
    lines += [f"  - {d}" for d in differences]
    lines.append(f"If the new setup is intended, re-record with: {update_command}")
    return "\n".join(lines)
