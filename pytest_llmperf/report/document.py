"""The report document: one plain dict per pytest session, the one thing reports read.

`build_report` makes it once at the end, `merge_reports` joins xdist workers' documents;
plain (what `json.loads` returns) so it crosses xdist's channel and a file unchanged.

Keys (tools read them, so they are only ever added to):

    plugin_version, target, profile    what ran
    inconclusive                       the --llmperf-inconclusive policy
    servers_started, servers_attached  server names in start order; attached: endpoints
                                       someone else runs (--llmperf-base-url)
    runs[]                             server, workload, provenance, summary (median per
                                       metric), samples, notes, published_reference,
                                       results (raw RunResults), completed, attempted,
                                       failed, stop_reasons, server_death, server_log,
                                       warmup, server_warmup, workload_identity (what a
                                       baseline entry is keyed by), requests (the rows
                                       the verdict rule pairs, as baseline files hold them)
    history[]                          with --llmperf-store only: the history lines the
                                       session's gates queued for the store
    baselines_written[]                --update-baselines: the baseline files written
                                       (paths from the rootdir)
    verdicts[]                         test, server, concurrency, baseline, outcome,
                                       message, verdicts (Verdict fields),
                                       baseline_figures, baseline_provenance (None without
                                       an entry); changes, attribution, explanation under
                                       a failing/improved table (report/explain.py)
    capacities[]                       llmperf.capacity(): per search, test, server, line,
                                       capacity, interval, runs, seconds, verdict, over,
                                       slos (name, label, limit_ms), probes (load, outcome,
                                       runs, values_ms per SLO), first_broken (an SLO's name)
    paired                             paired A/B sessions (paired.py): kind, old, new,
                                       old_label, new_label, order (every server start)
                                       and runs (OLD's, as runs[] holds NEW's)
    workers, lost_workers              merged documents only: workers that reported and
                                       those lost; each run and verdict names its `worker`
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pytest_llmperf import __version__
from pytest_llmperf.baselines.compare import Change, Verdict
from pytest_llmperf.metrics.registry import COMPLETED, FAILED, Direction, Tolerance
from pytest_llmperf.metrics.uncertainty import encode_rows


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} does not belong in a report document: {value!r}")


def plain(value: Any) -> Any:
    """`value` as JSON gives it back: dataclasses as dicts, tuples as lists, str enums as
    their values, keys as strings."""
    return json.loads(json.dumps(value, default=_encode))


def build_report(perf: Any) -> dict[str, Any]:
    """The document of one session (a PerfSession, read only here)."""
    identity = perf.workload_identity
    document: dict[str, Any] = plain(
        {
            "plugin_version": __version__,
            "target": perf.options.target,
            "profile": perf.options.profile,
            "inconclusive": perf.options.inconclusive,
            "confirm": perf.options.confirm,
            "servers_started": list(perf.pool.starts),
            "servers_attached": list(perf.pool.attached),
            "runs": [_run(run, identity(run)) for run in perf.runs.values()],
            "verdicts": [
                {
                    "test": gate.nodeid,
                    "server": gate.server,
                    "concurrency": gate.concurrency,
                    "baseline": gate.baseline_path,
                    "outcome": gate.outcome,
                    "message": gate.message,
                    "verdicts": gate.verdicts,
                    "baseline_figures": gate.baseline_figures,
                    "baseline_provenance": gate.baseline_provenance,
                    "changes": gate.changes,
                    "attribution": gate.attribution,
                    "explanation": gate.explanation,
                    "checks": gate.checks,
                }
                for gate in perf.gates
            ],
        }
    )
    if perf.capacities:  # llmperf.capacity(): each search's line, figures, cost and verdict
        document["capacities"] = plain(list(perf.capacities))
    if perf.baselines_written:  # --update-baselines: the files, for a shared store (llmperf baselines --store)
        document["baselines_written"] = list(perf.baselines_written)
    if perf.history_for_store:  # history lines for a shared store (--llmperf-store), written at the session's end
        document["history"] = plain(perf.history_for_store)
    paired = perf.paired_info()
    if paired is not None:  # a paired A/B session (paired.py): OLD's runs and the start order
        against = paired.pop("against")
        document["paired"] = plain({**paired, "runs": [_run(run) for run in against]})
    return document


def _run(run: Any, identity: Any = None) -> dict[str, Any]:
    return {
        "server": run.server.describe(),
        "workload": run.workload.to_dict(),
        "workload_identity": identity,
        "provenance": run.provenance,
        "summary": run.figures,
        "samples": run.samples,
        "notes": run.notes,
        "published_reference": run.published,
        "results": [result.to_dict() for result in run.results],
        COMPLETED: sum(r.completed for r in run.results),
        "attempted": sum(r.attempted for r in run.results),
        FAILED: sum(r.failed for r in run.results),
        "stop_reasons": sorted({r.stop_reason for r in run.results}),
        "server_death": run.server_death,
        "server_log": run.server_log,
        "warmup": run.results[0].warmup_figures() if run.results else None,
        "server_warmup": run.server_warmup,
        "requests": encode_rows(run.rows),  # the first repetition's, one line each, as baselines keep them
    }


def _worker_order(worker: str) -> tuple[int, str]:
    return len(worker), worker  # gw2 before gw10


def merge_reports(reports: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One document from the workers' (worker id -> document, None for a lost worker), in
    worker order, each run and verdict naming its worker; None when no worker reported."""
    workers = sorted((w for w, doc in reports.items() if doc is not None), key=_worker_order)
    if not workers:
        return None
    first = reports[workers[0]]
    assert first is not None
    merged: dict[str, Any] = {
        **{key: first.get(key) for key in ("plugin_version", "target", "profile", "inconclusive", "confirm")},
        "servers_started": [],
        "servers_attached": [],
        "runs": [],
        "verdicts": [],
        "workers": workers,
        "lost_workers": sorted((w for w, doc in reports.items() if doc is None), key=_worker_order),
    }
    for worker in workers:
        doc = reports[worker]
        assert doc is not None
        merged["servers_started"] += doc.get("servers_started", [])
        merged["servers_attached"] += doc.get("servers_attached", [])
        merged["runs"] += [{**run, "worker": worker} for run in doc.get("runs", [])]
        merged["verdicts"] += [{**gate, "worker": worker} for gate in doc.get("verdicts", [])]
        merged_capacities = [{**line, "worker": worker} for line in doc.get("capacities", [])]
        if merged_capacities:
            merged.setdefault("capacities", []).extend(merged_capacities)
        for key in ("history", "baselines_written"):
            if doc.get(key):
                merged.setdefault(key, []).extend(doc[key])
        if doc.get("paired"):
            paired = merged.setdefault("paired", {**doc["paired"], "order": [], "runs": []})
            paired["order"] += [{**start, "worker": worker} for start in doc["paired"].get("order", [])]
            paired["runs"] += [{**run, "worker": worker} for run in doc["paired"].get("runs", [])]
    return merged


_VERDICT_FIELDS = {f.name for f in dataclasses.fields(Verdict)}


def verdict_from_dict(data: Mapping[str, Any]) -> Verdict:
    """A Verdict again from its document form, for the tables that format one."""
    fields = {k: v for k, v in data.items() if k in _VERDICT_FIELDS}
    change, tolerance = fields.get("change"), fields.get("tolerance")
    fields["change"] = Change(**change) if change else None
    fields["tolerance"] = Tolerance(**tolerance) if tolerance else None
    fields["direction"] = Direction.parse(fields.get("direction", Direction.HIGHER))
    if fields.get("chances") is not None:
        fields["chances"] = tuple(fields["chances"])
    return Verdict(**fields)
