"""Baseline files: baselines/<target>/<server>.json, written atomically and deterministically.
This module holds what every reader and writer of them shares: file names, numbers as
written, an entry's workload key, deterministic JSON, and the error an unusable file raises.

Layout (format 2): per concurrency, one entry per workload key.

    {"format": 2, "target": "NVIDIA-H200", "server": "qwen3.6-35b-a3b-fp8-mtp",
     "concurrency": {"8": {"endpoint=completions ... max_tokens=256 ...": {
         "workload": {...}, "provenance": {...},
         "metrics": {"decode_tok_s": {"value": 407.9, "samples": [...],
                                      "spread": 0.012, "direction": "higher"}},
         "requests": ["17 263 256 86 412.5 17030.2", ...],
         "outputs": ["17 length 3f2a9c1b0d4e", ...]}}}}

- key: `workload_key`, every workload value but WHERE_KEYS, as sorted `name=value`; the
  same workload run elsewhere is one entry (comparing refuses, recording replaces it).
- value = median of the samples; spread = (max - min) / |median| (0 for one sample,
  null when the median is 0).
- requests: per request in dispatch order, prompt index, prompt tokens, output tokens,
  chunks, TTFT ms, E2EL ms (metrics/uncertainty.py); outputs: prompt index, finish
  reason, 12-character sha256 of the text (metrics/crosscheck.py). Files without them
  load; the checks that need them are noted as not run.
- Concurrency keys in numeric order, others alphabetical; numbers to 6 significant
  digits; indent 2, trailing newline: the same data gives byte-identical files.
- Format 1 files (`"8": {"workload": ...}`) load; the next record writes format 2.

Published figures (baselines/published/<server>.json) are hand-curated and report-only,
kept apart so --update-baselines never rewrites them.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FORMAT = 2
READ_FORMATS = (1, 2)  # format 1: one entry per concurrency, keyed here by its workload
PUBLISHED_FORMAT = 1
SIG_DIGITS = 6
PUBLISHED_DIR = "published"


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# --- names and numbers -------------------------------------------------------------


def sanitize_name(name: str) -> str:
    """A file-system-safe name: "NVIDIA H200" -> "NVIDIA-H200", "Qwen/Qwen3.6" -> "Qwen-Qwen3.6"."""
    if not isinstance(name, str):
        raise ValueError(f"a target or server name must be a string, got {name!r}")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip())
    safe = re.sub(r"-{2,}", "-", safe).strip("-.")
    if not safe:
        raise ValueError(f"{name!r} is not usable as a file name (nothing left after sanitizing)")
    return safe


def stable_float(x: float) -> float:
    """Round to SIG_DIGITS significant digits so reruns format identically."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):  # numpy scalars are Real
        raise ValueError(f"expected a number, got {x!r}")
    if not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {x!r}")
    r = float(f"{float(x):.{SIG_DIGITS}g}")
    return 0.0 if r == 0 else r  # no "-0.0" in files


# --- entries by workload ------------------------------------------------------------

# Where a run ran, not what it asked: outside an entry's key, so a change is refused.
WHERE_KEYS = frozenset({"concurrency", "model", "dataset", "clock_speed"})


def workload_key(workload: Mapping[str, Any]) -> str:
    """The key of a workload's entry: "endpoint=completions ignore_eos=false max_seconds=60
    max_tokens=256 num_prompts=16 profile=smoke seed=0 warmup=2" (every value but
    WHERE_KEYS, sorted by name; None is null, whole floats are written as integers)."""
    parts = [f"{name}={_key_value(workload[name])}" for name in sorted(workload) if name not in WHERE_KEYS]
    return " ".join(parts) or "default"


def _key_value(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        return str(int(float(value)))
    if isinstance(value, str):
        return value
    return json.dumps(plain_json(value, "workload"), sort_keys=True, separators=(",", ":"))


# --- deterministic JSON ------------------------------------------------------------


def plain_json(value: Any, where: str) -> Any:
    """JSON-able copy with sorted keys; rejects NaN/inf and non-JSON types up front."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(value[k], f"{where}.{k}") for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [plain_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} cannot be stored (not a finite number)")
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, numbers.Integral):  # numpy integers
        return int(value)
    if isinstance(value, numbers.Real):
        return plain_json(float(value), where)
    if isinstance(value, Path):
        return value.as_posix()
    raise ValueError(f"{where}: {type(value).__name__} {value!r} cannot be stored in JSON")


def by_concurrency(entries: Mapping[int, Any]) -> dict[str, Any]:
    return {str(c): entries[c] for c in sorted(entries)}


def dump_json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False) + "\n"
