"""A baseline entry as a typed value: what a run is judged against (store.py keeps its
JSON shape: workload, provenance, metrics, requests, outputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BaselineEntry:
    """One entry: the workload it was recorded under, its provenance, each metric's value
    (and per-repetition samples), and the first repetition's request and output lines
    (None: recorded by a version that kept none)."""

    workload: Mapping[str, Any]
    provenance: Mapping[str, Any]
    metrics: Mapping[str, Mapping[str, Any]]  # name -> {"value": ..., "samples": [...]}
    requests: Sequence[str] | None = None  # metrics/uncertainty.encode_rows
    outputs: Sequence[str] | None = None  # metrics/crosscheck.encode_outputs

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> BaselineEntry:
        return cls(
            workload=entry["workload"],
            provenance=entry["provenance"],
            metrics=entry["metrics"],
            requests=entry.get("requests"),
            outputs=entry.get("outputs"),
        )

    def as_dict(self) -> dict[str, Any]:
        """The entry in store.py's shape (no request or output lines where it has none)."""
        out: dict[str, Any] = {"workload": self.workload, "provenance": self.provenance, "metrics": self.metrics}
        if self.requests is not None:
            out["requests"] = self.requests
        if self.outputs is not None:
            out["outputs"] = self.outputs
        return out

    @property
    def figures(self) -> dict[str, Any]:
        """Each metric's recorded value."""
        return {name: m["value"] for name, m in self.metrics.items()}

    def samples(self, name: str) -> list[float | None]:
        """The metric's per-repetition values (empty where none were kept)."""
        recorded = self.metrics.get(name)
        return list(recorded.get("samples", ())) if recorded else []
