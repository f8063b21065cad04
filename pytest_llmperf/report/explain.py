"""Failures that explain themselves: what changed since the baseline, why decode moved.

Printed under a failing or `improved` verdict table (gate.py) and kept in the report
document. *What changed*: the baseline's provenance against tonight's, key by key, leaving
out when and how much was measured. *Why decode moved* (speculative servers, not invalid
runs): decode = acceptance_length x 1 / step_time x occupancy, exactly, so the log of the
decode ratio splits into the three factors' (step_time = mean TPOT x acceptance_length,
occupancy = decode x mean TPOT); occupancy shows when it moved OCCUPANCY_SHOWN or more.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.capacity.search import CAPACITY_PROBES
from pytest_llmperf.metrics.registry import ACCEPTANCE_LENGTH, DECODE, TPOT_MEAN, TPOT_MEDIAN

# Provenance that says when or how much, not what ran: never a "change".
IGNORED = frozenset(
    {
        "date",
        "peak_gpu_memory_mib",
        "peak_gpu_memory_per_gpu_mib",
        "gpu_memory_samples",
        "gpu_error",
        "gpu_ids",  # which GPUs of the box ran it (--llmperf-gpus): any of one model may gate
        "docker_host",  # older baselines' engine, where a session drove several: not what ran
        "speedup_base",  # the speedup test's base server: its own run has its own provenance
        CAPACITY_PROBES,  # a capacity search's probes: its figures, not what ran
        "server.name",  # the baseline file is the server's: the same name by construction
        "dataset.path",  # the file name; the hash below says whether the content moved
        "dataset.records",
        "dataset.conversations",
        "dataset.size_bytes",
        "dataset.skipped_short",
        "dataset.truncated",
        "dataset.prompts",  # a custom file's line count: its hash says whether it moved
    }
)

# Display names and order: what a reader checks first comes first; other keys follow by name.
LABELS: dict[str, str] = {
    "image": "image",
    "image_id": "image id",
    "image_digest": "image digest",
    "server.image": "image",
    "vllm_version": "vLLM version",
    "server.model": "model",
    "server.args": "server args",
    "server.speculative_config": "speculative config",
    "server.env": "server env",
    "server.served_model_name": "served model name",
    "max_model_len": "max_model_len",
    "gpu_name": "GPU",
    "gpu_count": "GPU count",
    "gpu_driver": "GPU driver",
    "gpu_memory_total_mib": "GPU memory",
    "target": "target",
    "sim_args": "simulator args",
    "clock_speed": "simulator clock speed",
    "plugin_version": "plugin version",
    "dataset.sha256": "dataset sha256",
    "prompt_length_source": "prompt lengths from",
    "git_commit": "git commit",
}

OCCUPANCY_SHOWN = 0.005  # |change| at which the occupancy factor is printed


@dataclass(frozen=True)
class ProvenanceChange:
    key: str  # dotted provenance key ("server.args")
    label: str  # what a reader calls it ("server args")
    baseline: str
    measured: str

    def describe(self) -> str:
        return f"{self.label}: {self.baseline} -> {self.measured}"


def _flat(provenance: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in provenance.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name in ("server", "dataset"):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def _shown(key: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if key == "dataset.sha256" and isinstance(value, str):
        return value[:12]
    if isinstance(value, (list, tuple)):
        return shlex.join(str(v) for v in value) if value else "(none)"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _order(key: str) -> tuple[int, str]:
    keys = list(LABELS)
    return (keys.index(key), key) if key in LABELS else (len(keys), key)


def provenance_changes(baseline: Mapping[str, Any], measured: Mapping[str, Any]) -> list[ProvenanceChange]:
    """What differs between the baseline's provenance and tonight's, in LABELS order; a
    key on one side only is a change ("(not recorded)" on the other)."""
    old, new = _flat(baseline or {}), _flat(measured or {})
    if "image" in old or "image" in new:  # the container's image says it; the spec's would repeat it
        old.pop("server.image", None)
        new.pop("server.image", None)
    changes = []
    for key in sorted(set(old) | set(new), key=_order):
        if key in IGNORED or old.get(key) == new.get(key):
            continue
        changes.append(
            ProvenanceChange(
                key,
                LABELS.get(key, key),
                _shown(key, old[key]) if key in old else "(not recorded)",
                _shown(key, new[key]) if key in new else "(not recorded)",
            )
        )
    return changes


def format_changes(changes: Sequence[ProvenanceChange], recorded: str | None = None) -> list[str]:
    """The "what changed since the baseline" block: one line for none or one change, else
    a line per change."""
    when = f" (recorded {recorded})" if recorded else ""
    head = f"what changed since the baseline{when}:"
    if not changes:
        return [f"{head} nothing its provenance records; the difference is in the run itself"]
    if len(changes) == 1:
        return [f"{head} nothing but the {changes[0].describe()}"]
    return [head, *(f"  - {c.describe()}" for c in changes)]


# --- why decode moved ----------------------------------------------------------------


@dataclass(frozen=True)
class DecodeAttribution:
    """Relative changes (0.05 = +5 %): of decode tok/s, and of decode explained by each
    factor alone; (1 + acceptance_length)(1 + step_time)(1 + occupancy) = 1 + decode."""

    decode: float
    acceptance_length: float
    step_time: float
    occupancy: float
    # (baseline, measured) of each factor: tokens per step, ms per step, streams decoding.
    lengths: tuple[float, float]
    step_ms: tuple[float, float]
    streams: tuple[float, float]

    def describe(self) -> str:
        parts = [
            f"{self.acceptance_length * 100:+.1f}% from acceptance length",
            f"{self.step_time * 100:+.1f}% from step time",
        ]
        if abs(self.occupancy) >= OCCUPANCY_SHOWN:
            parts.append(f"{self.occupancy * 100:+.1f}% from batch occupancy")
        return f"{self.decode * 100:+.1f}% decode: " + ", ".join(parts)

    def detail(self) -> str:
        (l0, l1), (s0, s1), (n0, n1) = self.lengths, self.step_ms, self.streams
        return (
            f"decode = tokens per step x steps per second x streams decoding; acceptance length "
            f"{l0:.2f} -> {l1:.2f} tokens per step, step {s0:.1f} -> {s1:.1f} ms, {n0:.1f} -> {n1:.1f} "
            "streams decoding; the parts multiply to the total"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "decode": self.decode,
            ACCEPTANCE_LENGTH: self.acceptance_length,
            "step_time": self.step_time,
            "occupancy": self.occupancy,
            "text": self.describe(),
        }


def _positive(figures: Mapping[str, Any], name: str) -> float | None:
    value = figures.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _factors(figures: Mapping[str, Any]) -> tuple[float, float, float, float] | None:
    """(decode, acceptance length, step ms, streams decoding), or None when a figure is missing."""
    decode = _positive(figures, DECODE)
    length = _positive(figures, ACCEPTANCE_LENGTH)
    tpot = _positive(figures, TPOT_MEAN) or _positive(figures, TPOT_MEDIAN)
    if decode is None or length is None or tpot is None:
        return None
    return decode, length, tpot * length, decode * tpot / 1000.0


def decode_attribution(baseline: Mapping[str, Any], measured: Mapping[str, Any]) -> DecodeAttribution | None:
    """Split the decode tok/s change from `baseline` to `measured` (metric -> value) into
    acceptance length, step time and occupancy; None without the figures."""
    old, new = _factors(baseline), _factors(measured)
    if old is None or new is None:
        return None
    (d0, l0, s0, n0), (d1, l1, s1, n1) = old, new
    return DecodeAttribution(
        decode=d1 / d0 - 1,
        acceptance_length=l1 / l0 - 1,
        step_time=s0 / s1 - 1,  # slower steps, less decode
        occupancy=n1 / n0 - 1,
        lengths=(l0, l1),
        step_ms=(s0, s1),
        streams=(n0, n1),
    )


def format_attribution(attribution: DecodeAttribution) -> list[str]:
    return [f"why decode moved: {attribution.describe()}", f"  ({attribution.detail()})"]


def explanation(
    baseline_provenance: Mapping[str, Any] | None,
    measured_provenance: Mapping[str, Any],
    baseline_figures: Mapping[str, Any] | None,
    measured_figures: Mapping[str, Any],
    speculative: bool,
) -> tuple[list[str], list[ProvenanceChange], DecodeAttribution | None]:
    """The lines under a failing or improved table: what changed, then (speculative
    servers) why decode moved; with the changes and the attribution themselves."""
    if baseline_provenance is None:
        return [], [], None
    changes = provenance_changes(baseline_provenance, measured_provenance)
    recorded = baseline_provenance.get("date")
    lines = format_changes(changes, str(recorded) if recorded else None)
    attribution = decode_attribution(baseline_figures or {}, measured_figures) if speculative else None
    if attribution is not None:
        lines += format_attribution(attribution)
    return lines, changes, attribution
