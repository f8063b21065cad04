"""The terminal summary: what was measured per server, then the verdicts.

Rendered from a report document, never a live session, so xdist's merged documents print alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.metrics.registry import COMPLETED, DECODE, DURATION, FAILED, Metric, Needs, active, format_value
from pytest_llmperf.report.box import box_lines
from pytest_llmperf.report.document import verdict_from_dict
from pytest_llmperf.report.series import concurrency_of, server_name
from pytest_llmperf.report.table import PUBLISHED_HEADER, SummaryRow, format_summary_table, render_columns

Doc = Mapping[str, Any]


def slo_lines(runs: list[Doc]) -> list[str]:
    """Which SLOs the goodput columns were judged at: one line per set of SLOs."""
    by_slos: dict[str, list[str]] = {}
    for run in runs:
        slos = (run.get("workload") or {}).get("slos")
        if slos:
            by_slos.setdefault(slos, []).append(f"{server_name(run)} @ {concurrency_of(run)}")
    return [f"goodput SLOs (ms) {slos}: {', '.join(where)}" for slos, where in by_slos.items()]


def completed_text(run: Doc) -> str:
    text = f"{run[COMPLETED]}/{run['attempted']}"
    reasons = set(run.get("stop_reasons", ()))
    if "max_seconds" in reasons:
        text += " (time cap)"
    if "interrupted" in reasons:
        text += " (interrupted)"
    failed = run.get(FAILED, 0)
    return text + (f", {failed} failed" if failed else "")


def figure_columns(runs: list[Doc]) -> tuple[tuple[str, str], ...]:
    """The measured table's (header, metric) columns: the registry's columns (the seeds'
    headline figures), each group shown where a run can have it: those needing nothing
    or a speculative server's counters always, those needing SLOs where some run had
    SLOs, the others (a reasoning model's) where some run has one of them."""
    columns = active().columns()
    slos = any((run.get("workload") or {}).get("slos") for run in runs)

    def shown(group: Needs | None) -> bool:
        if group is None or group is Needs.SPEC_DECODE:
            return True
        if group is Needs.SLOS:
            return slos
        return any(
            run.get("summary", {}).get(m.name) is not None for run in runs for m in columns if _group(m) is group
        )

    return tuple((m.column, m.name) for m in columns if shown(_group(m)))


def _group(row: Metric) -> Needs | None:
    return row.needs[0] if row.needs else None


def measured_rows(runs: list[Doc]) -> tuple[list[str], list[list[str]]]:
    """server | conc | completed | the seeds' headline figures (a reasoning model's and goodput
    at SLOs too, when a run has them); a published row under a run that has one."""
    columns = figure_columns(runs)
    header = ["server", "conc", COMPLETED, *(h for h, _ in columns)]
    rows = []
    for run in runs:
        figures = run.get("summary", {})
        rows.append(
            [
                server_name(run),
                str(concurrency_of(run)),
                completed_text(run),
                *(format_value(m, figures.get(m)) for _, m in columns),
            ]
        )
        published = run.get("published_reference", {})
        if any(published.get(m) is not None for _, m in columns):
            rows.append([f"  {PUBLISHED_HEADER}", "", "", *(format_value(m, published.get(m)) for _, m in columns)])
    return header, rows


def measured_table(runs: list[Doc]) -> list[str]:
    header, rows = measured_rows(runs)
    return [*render_columns(header, rows, right=set(range(1, len(header)))), *slo_lines(runs)]


def warmup_table(runs: list[Doc]) -> list[str]:
    """Each warm-up's own figures beside the run it preceded: what a cold start costs. A
    server's first run has its server-level warm-up on the line above it."""
    rows = []
    for run in runs:
        measured = format_value(DECODE, run.get("summary", {}).get(DECODE))
        for kind, figures in (("server", run.get("server_warmup")), (str(concurrency_of(run)), run.get("warmup"))):
            if not figures:
                continue
            failed = f", {figures[FAILED]} failed" if figures.get(FAILED) else ""
            rows.append(
                [
                    server_name(run),
                    kind,
                    f"{figures.get('requests')}{failed}",
                    f"{figures.get(DURATION) or 0:.1f}",
                    format_value(DECODE, figures.get("output_tok_s")),
                    measured if kind != "server" else "",
                ]
            )
    if not rows:
        return []
    header = ["warm-up (not measured)", "conc", "requests", "seconds", "output tok/s", "measured decode tok/s"]
    return ["", *render_columns(header, rows, right=set(range(1, 6)))]


def _started(doc: Doc) -> list[str]:
    workers = doc.get("workers") or []
    where = "one at a time" if len(workers) < 2 else f"one at a time on each of {len(workers)} xdist workers"
    paired = doc.get("paired")
    if paired and paired.get("order"):
        order = ", ".join(f"{start['server']} {start['role']}" for start in paired["order"])
        return [
            f"paired A/B: {paired['new_label']} (B) judged against {paired['old_label']} (A); the baseline "
            "column of the verdicts is A",
            f"servers started ({where}, {len(paired['order'])} starts): {order}",
        ]
    lines = [f"servers started ({where}): " + ", ".join(doc["servers_started"])] if doc.get("servers_started") else []
    if doc.get("servers_attached"):
        lines.append("servers used (run by someone else, none started here): " + ", ".join(doc["servers_attached"]))
    return lines + _slots(doc)


def _slots(doc: Doc) -> list[str]:
    """--llmperf-gpus: which GPUs each server ran on."""
    where: dict[str, list[str]] = {}
    for run in doc.get("runs", []):
        provenance = run.get("provenance") or {}
        if not provenance.get("gpu_ids"):
            continue
        worker = f" ({run['worker']})" if run.get("worker") else ""
        slot = f"GPUs {','.join(str(g) for g in provenance['gpu_ids'])}{worker}"
        names = where.setdefault(slot, [])
        name = run.get("server", {}).get("name", "?")
        if name not in names:
            names.append(name)
    if not where:
        return []
    return ["GPU slots: " + "; ".join(f"{slot}: {', '.join(names)}" for slot, names in where.items())]


def capacity_lines(doc: Doc) -> list[str]:
    """One line per capacity search (llmperf.capacity): the figure, its interval, the SLO
    broken first and where, the runs and seconds it cost; then the gate's line where judged."""
    lines = []
    for found in doc.get("capacities") or []:
        lines.append(f"capacity {found['server']}: {found['line']}  [{found['test']}]")
        if found.get("verdict"):
            lines.append(f"  {found['verdict']}")
    return lines


def terminal_lines(doc: Doc, *, warmups: bool = False) -> list[str]:
    """The summary of a report document (build_report's, or merge_reports'); `warmups` (-v):
    the warm-ups' table too (the session's log lines carry the same figures)."""
    lines = _started(doc)
    for worker in doc.get("lost_workers") or []:
        lines.append(f"xdist worker {worker} went down without reporting: its runs are missing here and in the report")
    lines += capacity_lines(doc)
    runs = list(doc.get("runs", []))
    if not runs and not doc.get("capacities"):
        return lines + ["no workload ran"]
    paired = doc.get("paired")
    if paired and paired.get("runs"):
        lines += ["", f"B: {paired['new_label']}", *measured_table(runs)]
        lines += ["", f"A: {paired['old_label']}", *measured_table(list(paired["runs"]))]
    elif runs:  # a session of capacity tests alone has its lines above and its verdicts below
        lines += ["", *measured_table(runs)]
    if warmups:
        lines += warmup_table(runs)
    for run in runs:
        notes = [*([run["server_death"]] if run.get("server_death") else []), *run.get("notes", [])]
        lines += [f"note: {server_name(run)} @ {concurrency_of(run)}: {note}" for note in notes]

    gates = list(doc.get("verdicts", []))
    by_server: dict[str, list[SummaryRow]] = {}
    recorded: list[str] = []
    for gate in gates:
        if gate["outcome"] == "recorded":
            recorded.append(f"{gate['server']} @ {gate['concurrency']}: {gate['message']}")
            continue
        if gate["outcome"] == "refused":
            lines.append(
                f"REFUSED {gate['server']} @ {gate['concurrency']}: baseline recorded under another workload "
                f"or hardware ({gate['baseline']})"
            )
            continue
        published = _published_for(runs, gate["server"], gate["concurrency"])
        for verdict in gate["verdicts"]:
            by_server.setdefault(gate["server"], []).append(
                SummaryRow(gate["concurrency"], verdict_from_dict(verdict), published.get(verdict["metric"]))
            )
    if by_server:
        lines += ["", format_summary_table(by_server)]
        lines.append(_gate_line(by_server, doc.get("confirm") or 1))
        lines += box_lines(
            [(server, row.concurrency, row.verdict) for server, rows in by_server.items() for row in rows]
        )
    hints = _hints(gates, "improved")
    if hints:
        lines += ["", "improvements beyond tolerance:", *hints]
    suspect = _hints(gates, "suspect")
    if suspect:
        lines += [
            "",
            "suspect: a regression the sessions before did not read (its test passed with a warning):",
            *suspect,
        ]
    undecided = _hints(gates, "inconclusive")
    if undecided:
        policy = doc.get("inconclusive") or "warn"
        lines += ["", f"inconclusive: the noise is too wide to tell (--llmperf-inconclusive {policy}):", *undecided]
    checks = _checks(gates)
    if checks:
        lines += ["", "cross-checks against the baselines' outputs:", *checks]
    if recorded:
        lines += ["", "baselines recorded (review and commit them):", *recorded]
    return lines


def _gate_line(by_server: dict[str, list[SummaryRow]], confirm: int) -> str:
    """How many cells were judged, the chance of a false red this session (each judged
    cell's false_red summed: a union bound), and when a regression fails."""
    rows = [row for rows in by_server.values() for row in rows]
    judged = [row.verdict.false_red for row in rows if row.verdict.status not in UNJUDGED]
    chances = [chance for chance in judged if chance is not None]
    alone = len(judged) - len(chances)
    if chances:
        bound = f"chance of a false red this session <= {_percent(sum(chances))}"
        bound += f" ({alone} judged on the tolerance alone not counted)" if alone else ""
    else:
        bound = "judged on the tolerance alone: no chance of a false red stated"
    when = (
        "a regression fails at once (--llmperf-confirm 1)"
        if confirm <= 1
        else f"a regression fails when {confirm} sessions in a row read it, or at once beyond twice its tolerance "
        f"(--llmperf-confirm {confirm})"
    )
    return f"{len(rows)} gated cell(s); {bound}; {when}"


def _percent(chance: float) -> str:
    """A chance as a percentage to two significant figures (at least 0.01 %)."""
    return f"{max(chance, 1e-4) * 100:.2g} %"


# Verdicts no noise judged: they fail for their own reasons, not as a false alarm.
UNJUDGED = frozenset({"invalid", "no-data", "missing-baseline"})
UNCHANGED = "outputs: unchanged for all"


def _checks(gates: list[Doc]) -> list[str]:
    """Each run's cross-check lines once (a run judged by two tests has them twice); the runs
    whose outputs were all unchanged on one line."""
    cells: dict[tuple[str, int], list[str]] = {}
    for gate in gates:
        lines = cells.setdefault((gate["server"], gate["concurrency"]), [])
        lines += [line for line in gate.get("checks") or [] if line not in lines]
    same: dict[str, list[str]] = {}
    rest = []
    for (server, concurrency), lines in cells.items():
        for line in lines:
            if line.startswith(UNCHANGED):
                same.setdefault(server, []).append(str(concurrency))
            rest.append(f"{server} @ {concurrency}: {line}")
    if sum(len(levels) for levels in same.values()) < 2:
        return rest
    rest = [line for line in rest if UNCHANGED not in line]
    where = "; ".join(f"{server} @ {', '.join(levels)}" for server, levels in same.items())
    runs = sum(len(levels) for levels in same.values())
    return [f"outputs unchanged in {runs} run(s) (temperature 0; canary, not gated): {where}", *rest]


def _hints(gates: list[Doc], status: str) -> list[str]:
    return [
        f"{gate['server']} @ {gate['concurrency']}: {v.get('hint', '')}"
        for gate in gates
        for v in gate["verdicts"]
        if v["status"] == status
    ]


def _published_for(runs: list[Doc], server: str, concurrency: int) -> dict[str, float]:
    for run in runs:
        if server_name(run) == server and concurrency_of(run) == concurrency:
            published: dict[str, float] = run.get("published_reference", {})
            return published
    return {}
