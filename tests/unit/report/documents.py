"""Report documents for the report tests: plain dicts, as build_report and xdist hand them over."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.baselines.compare import compare
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.report.document import plain

REL5 = Tolerance("relative", 0.05)


def run_entry(name: str, concurrency: int, decode: float, **extra: Any) -> dict[str, Any]:
    entry = {
        "server": {"name": name, "model": "org/m", "speculative_config": extra.pop("speculative_config", None)},
        "workload": {"concurrency": concurrency, "num_prompts": 4},
        "provenance": {"target": "sim"},
        "summary": {"decode_tok_s": decode, "ttft_ms_median": 40.0},
        "samples": {"decode_tok_s": [decode]},
        "notes": [],
        "published_reference": {},
        "results": [],
        "completed": 4,
        "attempted": 4,
        "failed": 0,
        "stop_reasons": ["completed"],
    }
    entry.update(extra)
    return entry


def gate_entry(test: str, server: str, concurrency: int, verdicts: list[Any], outcome: str = "pass", **extra: Any):
    return {
        "test": test,
        "server": server,
        "concurrency": concurrency,
        "baseline": f"baselines/sim/{server}.json",
        "outcome": outcome,
        "message": extra.pop("message", ""),
        "verdicts": plain(verdicts),
        **extra,
    }


def document(runs: list[Any], verdicts: list[Any], servers: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "plugin_version": "0.1.0",
        "target": "sim",
        "profile": "full",
        "inconclusive": "warn",
        "servers_started": servers,
        "runs": runs,
        "verdicts": verdicts,
        **extra,
    }


REGRESSED = compare("decode_tok_s", 100.0, 80.0, REL5, "higher", update_command="pytest 't::a' --update-baselines")
IMPROVED = compare("decode_tok_s", 100.0, 130.0, REL5, "higher", update_command="pytest 't::b' --update-baselines")
