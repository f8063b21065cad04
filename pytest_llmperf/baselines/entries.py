"""A baseline file's entries in memory (`BaselineFile`, and the report-only
`PublishedFile`), and one run's record as an update of its file: its values checked
when it is made, applied when the file is written."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.comparable import check_compatible
from pytest_llmperf.baselines.layout import (
    FORMAT,
    PUBLISHED_FORMAT,
    by_concurrency,
    dump_json,
    plain_json,
    stable_float,
    workload_key,
)
from pytest_llmperf.metrics.registry import metric
from pytest_llmperf.stats.median import median_and_range
from pytest_llmperf.util.secrets import strip_secrets


@dataclass
class BaselineFile:
    path: Path
    target: str
    server: str
    # {concurrency: {workload key: {"workload": {...}, "provenance": {...},
    #                "metrics": {name: {"value", "samples", "spread", "direction", "nights"}}}}}
    entries: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def entry(self, concurrency: int, workload: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The entry for `workload` at `concurrency`, or None. Without a workload: the only
        entry there (ValueError when there are several)."""
        at = self.entries.get(int(concurrency), {})
        if workload is not None:
            return at.get(workload_key(workload))
        if len(at) > 1:
            raise ValueError(
                f"{self.path}: concurrency {concurrency} has {len(at)} entries, one per workload; name the workload"
            )
        return next(iter(at.values()), None)

    def others(self, concurrency: int, workload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The entries at `concurrency` recorded under another workload than `workload`."""
        key = workload_key(workload)
        return [entry for k, entry in self.entries.get(int(concurrency), {}).items() if k != key]

    def metric(self, concurrency: int, name: str, workload: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        entry = self.entry(concurrency, workload)
        return entry["metrics"].get(name) if entry else None

    def value(self, concurrency: int, name: str, workload: Mapping[str, Any] | None = None) -> float | None:
        m = self.metric(concurrency, name, workload)
        return m["value"] if m else None

    def to_document(self) -> dict[str, Any]:
        return {
            "concurrency": by_concurrency(
                {c: plain_json(at, f"concurrency[{c}]") for c, at in self.entries.items() if at}
            ),
            "format": FORMAT,
            "server": self.server,
            "target": self.target,
        }

    def to_json(self) -> str:
        return dump_json(self.to_document())


@dataclass
class PublishedFile:
    """Report-only reference figures for a server, from a published write-up."""

    path: Path
    server: str
    # {concurrency: {"figures": {metric: value}, "source": str, "note": str}}
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)

    def figures(self, concurrency: int) -> dict[str, float]:
        entry = self.entries.get(int(concurrency))
        return dict(entry["figures"]) if entry else {}

    def to_json(self) -> str:
        return dump_json(
            {
                "concurrency": by_concurrency({c: plain_json(e, f"concurrency[{c}]") for c, e in self.entries.items()}),
                "format": PUBLISHED_FORMAT,
                "kind": "published-reference",
                "note": "Published figures, report-only: shown beside measured values, never gating.",
                "server": self.server,
            }
        )


def positive_concurrency(concurrency: Any) -> int:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    return concurrency


def entry_update(
    concurrency: int,
    metrics: Mapping[str, Sequence[float | None] | float | None],
    workload: Mapping[str, Any],
    provenance: Mapping[str, Any],
    requests: list[str] | None,
    outputs: list[str] | None,
    *,
    session: str = "",
    nights: int = 1,
) -> Callable[[BaselineFile], None]:
    """The record of one run as an update of its baseline file, its values checked now.

    `session`: the recording session's id; `nights`: how many recording sessions' values a
    metric's level is the median of (--llmperf-baseline-nights). A metric recorded before
    by another session, under the same workload, hardware and build (same_build), keeps the
    values of its last `nights` - 1 sessions beside this one's, each session counted once;
    anything else starts the metric's nights afresh (a new level accepted)."""
    workload = plain_json(dict(workload), "workload")
    provenance = plain_json(strip_secrets(dict(provenance)), "provenance")
    new_metrics = {}
    for name, raw in metrics.items():
        given: list[Any] = list(raw) if isinstance(raw, (list, tuple)) else [raw]  # stable_float checks each
        present = [s for s in given if s is not None]
        if not present:
            continue
        try:
            samples = [stable_float(s) for s in present]
        except ValueError as exc:
            raise ValueError(f"metric {name}: {exc}") from None
        median, spread = median_and_range(samples)
        new_metrics[name] = {
            "direction": metric(name).direction.value,
            "nights": [{"session": session, "value": stable_float(median)}],
            "samples": samples,
            "spread": None if spread is None else stable_float(spread),
            "value": stable_float(median),
        }
    request_lines = [str(line) for line in requests] if requests is not None else None
    output_lines = [str(line) for line in outputs] if outputs is not None else None
    key = workload_key(workload)

    def update(current: BaselineFile) -> None:
        at = current.entries.setdefault(concurrency, {})
        old = at.get(key)
        kept: dict[str, Any] = {}
        kept_requests = kept_outputs = None
        if old and not check_compatible(old["workload"], workload, old["provenance"], provenance):
            kept = dict(old["metrics"])
            kept_requests, kept_outputs = old.get("requests"), old.get("outputs")
        same = old is not None and same_build(old["provenance"], provenance)
        for name, new in new_metrics.items():
            earlier = recorded_nights(kept[name]) if same and name in kept else []
            kept[name] = with_nights(new, [n for n in earlier if n["session"] != session or not session], nights)
        entry: dict[str, Any] = {"metrics": kept, "provenance": provenance, "workload": workload}
        if (lines := request_lines if request_lines is not None else kept_requests) is not None:
            entry["requests"] = lines
        if (out := output_lines if output_lines is not None else kept_outputs) is not None:
            entry["outputs"] = out
        at[key] = entry

    return update


# What makes two recordings the same server build, whose nights one level may pool: the
# server as declared (image, flags, environment), the engine's version, the image's digest
# and the simulator's flags. Hardware and workload are checked apart (check_compatible).
BUILD_KEYS = ("server", "vllm_version", "image_digest", "image_id", "sim_args")


def same_build(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether two entries' provenance name the same build (BUILD_KEYS, each as recorded)."""
    return all(plain_json(old.get(key), key) == plain_json(new.get(key), key) for key in BUILD_KEYS)


def recorded_nights(recorded: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A recorded metric's nights, oldest first; an entry written before nights were kept is one night."""
    if "nights" in recorded:
        return [dict(n) for n in recorded["nights"]]
    return [{"session": "", "value": recorded["value"]}]


def with_nights(new: dict[str, Any], earlier: Sequence[Mapping[str, Any]], nights: int) -> dict[str, Any]:
    """`new` (one session's metric) with the `earlier` sessions' values, the last `nights` in
    all: its value their median, its samples and spread this session's."""
    kept = [*earlier, *new["nights"]][-max(nights, 1) :]
    return {**new, "nights": kept, "value": stable_float(statistics.median(n["value"] for n in kept))}
