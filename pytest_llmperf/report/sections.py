"""The report's content as rows of text, for markdown.py and html.py alike.

Cells are the terminal's (table.verdict_cells, terminal.measured_rows), so a number reads
the same in the terminal, summary.md and report.html.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.baselines.compare import Status
from pytest_llmperf.report.document import verdict_from_dict
from pytest_llmperf.report.series import concurrency_of, server_name
from pytest_llmperf.report.table import COLUMNS, format_change, verdict_cells
from pytest_llmperf.report.terminal import measured_rows

Doc = Mapping[str, Any]

# Provenance shown per server, in this order: (row label, key; dotted for nested).
PROVENANCE = (
    ("model", "server.model"),
    ("image", "image"),
    ("image digest", "image_digest"),
    ("image id", "image_id"),
    ("vLLM version", "vllm_version"),
    ("GPU", "gpu_name"),
    ("GPU count", "gpu_count"),
    ("GPU driver", "gpu_driver"),
    ("GPU ids (slot)", "gpu_ids"),  # --llmperf-gpus
    ("Docker host", "docker_host"),  # in documents of sessions that drove several engines; none now
    ("peak GPU memory (MiB)", "peak_gpu_memory_mib"),
    ("dataset", "dataset.path"),
    ("dataset name", "dataset.name"),  # random and custom (a ShareGPT run's has none)
    ("random tokenizer", "dataset.tokenizer"),
    ("dataset sha256", "dataset.sha256"),
    ("plugin version", "plugin_version"),
    ("git commit", "git_commit"),
    ("target", "target"),
    ("simulator clock speed", "clock_speed"),
    ("simulator args", "sim_args"),
    ("max_model_len", "max_model_len"),
    ("server args", "server.args"),
    ("speculative config", "server.speculative_config"),
    ("measured at", "date"),
)


@dataclass
class GateSection:
    """One test's assertion: its verdict table, or the one line of a recorded/refused gate."""

    title: str  # "qwen3.6-27b-fp8-mtp @ 8: tests/perf/...::test_mtp[8]"
    outcome: str  # pass, warn, fail, recorded, refused
    statuses: list[str] = field(default_factory=list)  # per row, for styling
    rows: list[list[str]] = field(default_factory=list)
    explanation: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    message: str = ""  # recorded/refused: what the session said
    anchor: str = ""  # the page's id for it: "gate-<its index in the document>"

    @property
    def noteworthy(self) -> bool:
        """Failing or improved: shown first, open."""
        return self.outcome == "fail" or Status.IMPROVED in self.statuses


def gate_sections(doc: Doc) -> list[GateSection]:
    """Every gate, failing ones first (then improved, then the rest), in session order otherwise."""
    sections = []
    for i, gate in enumerate(doc.get("verdicts", [])):
        title = f"{gate['server']} @ {gate['concurrency']}: {gate['test']}"
        section = GateSection(title, str(gate["outcome"]), anchor=f"gate-{i}")
        if gate["outcome"] in ("recorded", "refused"):
            section.message = str(gate.get("message", ""))
        for data in gate.get("verdicts", []):
            verdict = verdict_from_dict(data)
            section.statuses.append(str(verdict.status))
            section.rows.append(verdict_cells(verdict))
            if verdict.status in (Status.INVALID, Status.NO_DATA, Status.INCONCLUSIVE) and verdict.hint:
                section.hints.append(verdict.hint)
        section.explanation = list(gate.get("explanation") or [])
        section.hints += [str(line) for line in gate.get("checks") or []]  # the output canary (report/crosscheck.py)
        sections.append(section)
    rank = {True: 0, False: 1}
    return sorted(sections, key=lambda s: (rank[s.outcome == "fail"], rank[s.noteworthy]))


VERDICT_HEADER = list(COLUMNS)

# A cell's rank in the matrix: failing first, then the ones to look at, then passing.
FAILING = {"regressed", "invalid", "no-data", "missing-baseline", "fail", "refused"}
_RANK = {**dict.fromkeys(FAILING, 0), "inconclusive": 1, "suspect": 1, "warn": 1, "improved": 2}


@dataclass(frozen=True)
class MatrixCell:
    """One gated metric of one server at one concurrency: its verdict, its change (or the
    verdict again, without one), and the id of the table it comes from."""

    status: str
    text: str
    anchor: str

    @property
    def rank(self) -> int:
        return _RANK.get(self.status, 3)


MatrixRow = tuple[str, Any, dict[str, MatrixCell]]  # server, concurrency, metric -> cell


def verdict_matrix(doc: Doc) -> tuple[list[str], list[MatrixRow]]:
    """Server x concurrency rows, a column per gated metric ("run" for a gate without
    verdicts); the worse of two cells stays, and failing rows and columns come first."""
    rows: dict[tuple[str, Any], dict[str, MatrixCell]] = {}
    for i, gate in enumerate(doc.get("verdicts", [])):
        cells = rows.setdefault((str(gate["server"]), gate["concurrency"]), {})
        found = [(d["metric"], _cell(verdict_from_dict(d), f"gate-{i}")) for d in gate.get("verdicts", [])]
        outcome = str(gate["outcome"])
        for metric, cell in found or [("run", MatrixCell(outcome, outcome, f"gate-{i}"))]:
            if metric not in cells or cell.rank < cells[metric].rank:
                cells[metric] = cell
    metrics = list(dict.fromkeys(m for cells in rows.values() for m in cells))
    worst = {m: min(c[m].rank for c in rows.values() if m in c) for m in metrics}
    metrics.sort(key=lambda m: worst[m] > 0)
    ordered = sorted(rows.items(), key=lambda item: min(c.rank for c in item[1].values()) > 0)
    return metrics, [(server, concurrency, cells) for (server, concurrency), cells in ordered]


def _cell(verdict: Any, anchor: str) -> MatrixCell:
    status = str(verdict.status)
    change = format_change(verdict).split(" (", 1)[0]
    return MatrixCell(status, change if verdict.change is not None else status, anchor)


def outcome_counts(doc: Doc) -> dict[str, int]:
    counts: dict[str, int] = {}
    for gate in doc.get("verdicts", []):
        counts[str(gate["outcome"])] = counts.get(str(gate["outcome"]), 0) + 1
    return counts


# A test's outcomes in the order the banner counts them; the first two fail the session.
OUTCOME_ORDER = ("fail", "refused", "warn", "pass", "recorded")
FAILING_OUTCOMES = {"fail", "refused"}


@dataclass(frozen=True)
class Banner:
    """The report's first line: red when a test failed, green otherwise, grey when
    nothing was judged; the tests by outcome and the matrix's cells by verdict."""

    state: str  # fail, pass, none
    word: str  # FAIL, PASS, RECORDED, NOTHING JUDGED
    headline: str  # "10 of 18 tests failed"
    tests: list[tuple[str, int]]  # (outcome, count), in OUTCOME_ORDER
    cells: list[tuple[str, int]]  # (verdict, count) of the matrix's cells, failing first


def banner(doc: Doc) -> Banner:
    counts = outcome_counts(doc)
    total = sum(counts.values())
    tests = [(o, counts[o]) for o in (*OUTCOME_ORDER, *sorted(set(counts) - set(OUTCOME_ORDER))) if o in counts]
    cells: dict[str, int] = {}
    for _, _, row in verdict_matrix(doc)[1]:
        for cell in row.values():
            cells[cell.status] = cells.get(cell.status, 0) + 1
    by_rank = sorted(cells.items(), key=lambda item: (_RANK.get(item[0], 3), -item[1]))
    failed = sum(n for o, n in counts.items() if o in FAILING_OUTCOMES)
    plural = "s" if total != 1 else ""
    if not total:
        return Banner("none", "NOTHING JUDGED", "no performance assertion was judged", tests, by_rank)
    if failed:
        return Banner("fail", "FAIL", f"{failed} of {total} test{plural} failed", tests, by_rank)
    if counts.get("recorded") == total:
        return Banner("pass", "RECORDED", f"baselines recorded by {total} test{plural}", tests, by_rank)
    warned = counts.get("warn", 0)
    with_warnings = f", {warned} with warnings" if warned else ""
    return Banner("pass", "PASS", f"{total} of {total} test{plural} passed{with_warnings}", tests, by_rank)


def measured_table(doc: Doc) -> tuple[list[str], list[list[str]]]:
    return measured_rows(list(doc.get("runs", [])))


def _get(provenance: Mapping[str, Any], key: str) -> Any:
    value: Any = provenance
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _text(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def provenance_table(doc: Doc) -> tuple[list[str], list[list[str]]]:
    """One column per server (its first run's provenance), a row per PROVENANCE key any
    server has: whatever the results carry."""
    servers: dict[str, Mapping[str, Any]] = {}
    for run in doc.get("runs", []):
        provenance = {**run.get("provenance", {}), "server": run.get("server", {})}
        servers.setdefault(server_name(run), provenance)
    header = ["", *servers]
    rows = []
    for label, key in PROVENANCE:
        cells = [_text(_get(p, key)) for p in servers.values()]
        if key == "gpu_ids":  # a slot's GPUs as --llmperf-gpus writes them
            cells = [c.replace(" ", ",") for c in cells]
        if key == "dataset.sha256":
            cells = [c[:16] for c in cells]
        if any(cells):
            rows.append([label, *cells])
    return header, rows


@dataclass(frozen=True)
class ProvenanceBlock:
    """The provenance one server's runs carry ("all servers": what every server shares)."""

    title: str
    rows: list[tuple[str, str]]


def provenance_blocks(doc: Doc) -> list[ProvenanceBlock]:
    """One block per server, in run order; with several servers, what they all share comes
    first in a block of its own, and each server's block holds what is its own."""
    header, rows = provenance_table(doc)
    servers = header[1:]
    if len(servers) < 2:
        return [ProvenanceBlock(s, [(r[0], r[1]) for r in rows if r[1]]) for s in servers]
    shared = [row for row in rows if len(set(row[1:])) == 1]
    own = [row for row in rows if len(set(row[1:])) > 1]
    blocks = [ProvenanceBlock(f"all {len(servers)} servers", [(row[0], row[1]) for row in shared])] if shared else []
    for i, server in enumerate(servers, start=1):
        blocks.append(ProvenanceBlock(server, [(row[0], row[i]) for row in own if row[i]]))
    return blocks


def notes(doc: Doc) -> list[str]:
    lines = []
    for run in doc.get("runs", []):
        where = f"{server_name(run)} @ {concurrency_of(run)}"
        lines += [f"{where}: {note}" for note in [*([run["server_death"]] if run.get("server_death") else [])]]
        lines += [f"{where}: {note}" for note in run.get("notes", [])]
    lines += [
        f"xdist worker {w} went down without reporting: its runs are missing" for w in doc.get("lost_workers") or []
    ]
    return lines
