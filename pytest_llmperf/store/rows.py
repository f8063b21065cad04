"""A finished session as the store's rows: its report document without the raw
per-request records (they stay in the shard's report folder), one row per run, one per
judged metric, and the history lines its gates queued. Plain dicts, so a batch that could
not be written is spooled as JSON and pushed later unchanged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The raw per-request records of a run: kept by the shard's report folder (its CI artifact).
RAW_KEYS = ("results",)
# Keys of the document the store keeps in tables of their own.
TABLED_KEYS = ("history", "baselines_written")


def slim(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document without raw records: summaries, samples (what the verdict rule pairs),
    verdicts and provenance stay."""
    out = {k: v for k, v in document.items() if k not in TABLED_KEYS}
    out["runs"] = [{k: v for k, v in run.items() if k not in RAW_KEYS} for run in document.get("runs", [])]
    if isinstance(document.get("paired"), Mapping):
        paired = dict(document["paired"])
        paired["runs"] = [{k: v for k, v in run.items() if k not in RAW_KEYS} for run in paired.get("runs", [])]
        out["paired"] = paired
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_rows(document: Mapping[str, Any], artifact: str | None) -> list[dict[str, Any]]:
    rows = []
    for position, run in enumerate(document.get("runs", [])):
        samples = run.get("samples") or {}
        rows.append(
            {
                "position": position,
                "server": str((run.get("server") or {}).get("name", "")),
                "concurrency": (run.get("workload") or {}).get("concurrency"),
                "workload_identity": run.get("workload_identity"),
                "repetitions": max((len(v) for v in samples.values() if isinstance(v, list)), default=None),
                "summary": run.get("summary"),
                "samples": samples,
                "requests": run.get("requests"),
                "provenance": run.get("provenance"),
                "artifact": artifact,
            }
        )
    return rows


def verdict_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for gate in document.get("verdicts", []):
        for verdict in gate.get("verdicts") or []:
            change = verdict.get("change") or {}
            rows.append(
                {
                    "test": str(gate.get("test")),
                    "metric": str(verdict.get("metric")),
                    "server": str(gate.get("server")),
                    "concurrency": gate.get("concurrency"),
                    "baseline": _number(verdict.get("baseline")),
                    "measured": _number(verdict.get("measured")),
                    "change": _number(change.get("relative")),
                    "noise": _number(verdict.get("noise")),
                    "allowed": verdict.get("allowed"),
                    "outcome": str(verdict.get("status")),
                }
            )
    return rows


def history_rows(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "target": str(line.get("target", "")),
            "server": str(line["server"]),
            "concurrency": int(line["concurrency"]),
            "metric": str(line["metric"]),
            "workload": str(line.get("workload") or ""),
            "recorded_at": line.get("date"),
            "value": float(line["value"]),
            "outcome": str(line["outcome"]),
            "line": dict(line),
        }
        for line in lines
    ]


def finish_batch(
    session: Mapping[str, Any],
    document: Mapping[str, Any] | None,
    history: Sequence[Mapping[str, Any]],
    exit_status: int,
    finished_at: str,
    baselines: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """Everything a finished session writes, as one plain batch (written in one transaction);
    `baselines`: the (path, text) of each baseline file it wrote."""
    doc = slim(document) if document is not None else None
    artifact = session.get("report_dir")
    digests = [(run.get("provenance") or {}).get("image_digest") for run in (doc or {}).get("runs", [])]
    return {
        "session": dict(session),
        "finished_at": finished_at,
        "exit_status": exit_status,
        "digest": next((d for d in digests if d), None),  # the image's, known once a server ran
        "document": doc,
        "runs": run_rows(doc, artifact) if doc else [],
        "verdicts": verdict_rows(doc) if doc else [],
        "history": history_rows(history),
        "baselines": [{"path": path, "content": text} for path, text in baselines],
    }
