"""--llmperf-report: every run with its raw records, the verdicts and provenance."""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf import __version__
from pytest_llmperf.util.files import atomic_write_text


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__module__.endswith("tolerances"):  # enums
        return value.value
    return value


def build_report(perf: Any) -> dict[str, Any]:
    return {
        "plugin_version": __version__,
        "target": perf.options.target,
        "profile": perf.options.profile,
        "servers_started": list(perf.pool.starts),
        "runs": [
            {
                "server": run.spec.describe(),
                "workload": run.workload.to_dict(),
                "provenance": run.provenance,
                "summary": run.summary,
                "samples": run.samples,
                "notes": run.notes,
                "published_reference": run.published,
                "results": [result.to_dict() for result in run.results],
            }
            for run in perf.runs.values()
        ],
        "verdicts": [
            {
                "test": gate.nodeid,
                "server": gate.server,
                "concurrency": gate.concurrency,
                "baseline": gate.baseline_path,
                "outcome": gate.outcome,
                "message": gate.message,
                "verdicts": _plain(gate.verdicts),
            }
            for gate in perf.gates
        ],
    }


def write_report(perf: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(_plain(build_report(perf)), indent=1, sort_keys=True) + "\n")
