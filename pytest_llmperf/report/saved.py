"""`llmperf compare A.json B.json`: two saved results, read and paired here, judged by the
gate (saved_reference.py: A is the reference B is judged against) and put in words here,
in the session's table (report/table.py). A and B are both `--llmperf-report` JSON (or its
folder; runs paired by server and concurrency) or both `llmperf bench` outputs (one run
each). Runs of different workload identity or hardware are refused with the differences.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.comparable import check_compatible
from pytest_llmperf.baselines.compare import Status, Verdict
from pytest_llmperf.baselines.judgement import Judgement
from pytest_llmperf.metrics.crosscheck import OutputRow, output_rows, token_mismatch
from pytest_llmperf.metrics.failures import combine, failures
from pytest_llmperf.metrics.registry import ACCEPTANCE_RATE, active, flatten
from pytest_llmperf.metrics.uncertainty import Row, request_rows
from pytest_llmperf.report.crosscheck import check_lines
from pytest_llmperf.report.table import format_verdict_table, verdict_line
from pytest_llmperf.stats.median import median_of
from pytest_llmperf.workload.result import JSON_FORMAT, RunResult

REPORT, BENCH = "report", "bench"
QUIET = (Status.REGRESSED, Status.IMPROVED, Status.MISSING_BASELINE)  # verdicts whose hint is a record command
# A bench result's config keys that are how the client ran, not what was measured.
RUN_ONLY = frozenset(
    {
        "api_key",
        "connect_timeout",
        "read_timeout",
        "grace_seconds",
        "progress",
        "workers",
        "defer_decode_bytes",
        "progress_quiet_seconds",
        "progress_interval",
    }
)


class SavedError(ValueError):
    """A file that cannot be compared; the message names it and says why."""


@dataclass
class SavedRun:
    """One run of a saved file, as the rule needs it."""

    server: str
    concurrency: int
    identity: dict[str, Any]  # the workload identity
    hardware: dict[str, Any]  # provenance (only comparable.HARDWARE_KEYS are compared)
    figures: dict[str, float | None]  # median over repetitions, real time
    samples: dict[str, list[float | None]]  # per repetition
    results: list[RunResult] = field(default_factory=list)  # the raw runs, one per repetition
    rows: list[Row] = field(default_factory=list)  # the first repetition's requests
    outputs: list[OutputRow] = field(default_factory=list)  # and its output lines (metrics/crosscheck.py)
    speculative: bool = False
    invalid: str | None = None


def _load(path: Path) -> tuple[str, Any]:
    if path.is_dir():
        path = path / "report.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SavedError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SavedError(f"{path}: cannot read it: {exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SavedError(f"{path}: not JSON ({exc})") from None
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list) and "verdicts" in doc:
        return REPORT, doc
    if isinstance(doc, dict) and (doc.get("format") == JSON_FORMAT or {"config", "records"} <= doc.keys()):
        return BENCH, doc
    raise SavedError(
        f"{path}: neither a --llmperf-report JSON (with runs and verdicts) nor an `llmperf bench` result "
        f"(format {JSON_FORMAT!r})"
    )


def _dataset(provenance: Mapping[str, Any]) -> str | None:
    info = provenance.get("dataset")
    if isinstance(info, Mapping) and info.get("sha256"):
        return f"{Path(str(info.get('path', ''))).name} sha256:{str(info['sha256'])[:12]}"
    return None


def _invalid(results: Sequence[RunResult]) -> str | None:
    """Why runs cannot be judged from the saved records: failed requests, nothing completed,
    concurrency not reached, or output tokens that disagree (report/crosscheck.py)."""
    broken = combine(failures(r.records, r.attempted) for r in results)
    if broken.failed:
        return f"{broken.describe()}; the figures of a broken run judge nothing"
    if not any(r.completed for r in results):
        return "no request completed"
    for result in results:
        reached = result.concurrency_reached()
        short = reached.shortfall() if reached is not None else None
        if short:
            return short
    for result in results:
        mismatch = token_mismatch(result.token_account())
        if mismatch:
            return mismatch
    return None


def _report_runs(path: Path, doc: Mapping[str, Any]) -> list[SavedRun]:
    runs = []
    for i, run in enumerate(doc["runs"]):
        try:
            server = run["server"]
            provenance = run.get("provenance") or {}
            identity = run.get("workload_identity")
            if identity is None:  # as session.workload_identity builds it
                identity = {**run["workload"], "model": server.get("model")}
                if _dataset(provenance):
                    identity["dataset"] = _dataset(provenance)
                if "clock_speed" in provenance:
                    identity["clock_speed"] = provenance["clock_speed"]
            results = [RunResult.from_dict(r) for r in run.get("results") or []]
            samples = {k: list(v) for k, v in (run.get("samples") or {}).items()}
            rows = request_rows(results[0].records, clock_speed=results[0].clock_speed) if results else []
            death = run.get("server_death")
            runs.append(
                SavedRun(
                    server=str(server["name"]),
                    concurrency=int(run["workload"]["concurrency"]),
                    identity=dict(identity),
                    hardware=dict(provenance),
                    figures={k: median_of(v) for k, v in samples.items()} or dict(run.get("summary") or {}),
                    samples=samples,
                    results=results,
                    rows=rows,
                    outputs=output_rows(results[0].records) if results else [],
                    speculative=bool(server.get("speculative_config")),
                    invalid=str(death) if death else _invalid(results) if results else None,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SavedError(f"{path}: run {i + 1} is not a report run ({type(exc).__name__}: {exc})") from None
    return runs


def _bench_run(path: Path, doc: Mapping[str, Any]) -> SavedRun:
    try:
        result = RunResult.from_dict(dict(doc))
    except (KeyError, TypeError, ValueError) as exc:
        raise SavedError(f"{path}: not a readable `llmperf bench` result: {exc}") from None
    config = result.config
    identity = {k: v for k, v in config.items() if k not in RUN_ONLY}
    if result.clock_speed != 1.0:
        identity["clock_speed"] = result.clock_speed
    figures = flatten(result.summary().to_dict())
    provenance = dict(result.provenance)
    server = str(config.get("model") or "llmperf bench")  # older results do not name their model
    return SavedRun(
        server=server,
        concurrency=int(config.get("concurrency") or 1),
        identity=identity,
        hardware=provenance,
        figures=figures,
        samples={k: [v] for k, v in figures.items()},
        results=[result],
        rows=request_rows(result.records, clock_speed=result.clock_speed),
        outputs=output_rows(result.records),
        speculative=figures.get(ACCEPTANCE_RATE) is not None,
        invalid=_invalid([result]),
    )


def load_runs(path: Path) -> tuple[str, list[SavedRun]]:
    """The kind of file (REPORT or BENCH) and its runs; SavedError for anything else."""
    kind, doc = _load(path)
    runs = _report_runs(path, doc) if kind == REPORT else [_bench_run(path, doc)]
    if not runs:
        raise SavedError(f"{path}: a report with no runs; nothing to compare")
    return kind, runs


def gated_metrics(a: SavedRun, b: SavedRun, metrics: Sequence[str]) -> list[str]:
    """The metrics judged: those asked for, else as a test's assert_no_regression() gates them."""
    if metrics:
        return list(metrics)
    # B's SLOs are A's too: comparable runs share their identity.
    return list(active().gated(speculative=a.speculative or b.speculative, slos=bool(b.identity.get("slos"))))


def paired_runs(a_path: Path, b_path: Path) -> tuple[list[tuple[SavedRun, SavedRun]], list[str]]:
    """The comparable (A, B) runs of two files, and the lines naming the runs of one file
    only. SavedError when a file cannot be read, the kinds differ, nothing pairs, or a
    workload differs."""
    kind_a, runs_a = load_runs(a_path)
    kind_b, runs_b = load_runs(b_path)
    if kind_a != kind_b:
        raise SavedError(
            f"{a_path} is a {_kind_word(kind_a)} and {b_path} a {_kind_word(kind_b)}: compare two of a kind "
            "(their workloads are recorded differently)"
        )
    if kind_a == BENCH:
        pairs = [(runs_a[0], runs_b[0])]
        only_a: list[SavedRun] = []
        only_b: list[SavedRun] = []
    else:
        by_key = {(r.server, r.concurrency): r for r in runs_b}
        pairs = [(r, by_key[(r.server, r.concurrency)]) for r in runs_a if (r.server, r.concurrency) in by_key]
        paired_keys = {(a.server, a.concurrency) for a, _ in pairs}
        only_a = [r for r in runs_a if (r.server, r.concurrency) not in paired_keys]
        only_b = [r for r in runs_b if (r.server, r.concurrency) not in paired_keys]
        if not pairs:
            raise SavedError(
                f"no run of {b_path} has a server and concurrency of {a_path}: A has "
                f"{_names(runs_a)}, B has {_names(runs_b)}"
            )
    refusals = []
    for a, b in pairs:
        differences = check_compatible(a.identity, b.identity, a.hardware, b.hardware)
        if differences:
            refusals.append(
                f"{b.server} @ concurrency {b.concurrency}: different workloads or hardware; refusing to compare. "
                "Differences:\n" + "\n".join(f"  - {_sides(d)}" for d in differences)
            )
    if refusals:
        raise SavedError("\n".join(refusals))
    notes = [f"only in A: {r.server} @ {r.concurrency}" for r in only_a]
    notes += [f"only in B: {r.server} @ {r.concurrency}" for r in only_b]
    return pairs, notes


def compare_text(judgements: Sequence[Judgement], notes: Sequence[str]) -> tuple[str, bool]:
    """The judgements of B's runs in words, with `notes` (runs of one file only), and
    whether every verdict passed."""
    blocks: list[str] = []
    failing: list[Verdict] = []
    undecided: list[Verdict] = []
    for judgement in judgements:
        # Nothing is recorded here: the rows say what moved, without a record command.
        verdicts = [dataclasses.replace(v, hint="") if v.status in QUIET else v for v in judgement.verdicts]
        failing += [v for v in verdicts if not v.ok and v.status != Status.INCONCLUSIVE]
        undecided += [v for v in verdicts if v.status == Status.INCONCLUSIVE]
        change = judgement.outputs
        lines = check_lines(change, True, True) if change is not None else []
        blocks.append("\n".join([format_verdict_table(verdicts, title=judgement.title), *lines]))
    if failing:
        verdict = f"FAIL: {verdict_line(failing)}"
    elif undecided:
        verdict = f"pass, {len(undecided)} inconclusive (the noise is too wide to tell; see the hints)"
    else:
        verdict = "all pass"
    text = "\n\n".join(blocks) + ("\n\n" + "\n".join(notes) if notes else "") + f"\n\nllmperf compare: {verdict}"
    return text, not failing


def _sides(difference: str) -> str:
    """check_compatible's "key: baseline X, measured Y" as "key: A X, B Y"."""
    key, _, rest = difference.partition(": baseline ")
    return f"{key}: A {rest.replace(', measured ', ', B ', 1)}" if rest else difference


def _kind_word(kind: str) -> str:
    return "--llmperf-report JSON" if kind == REPORT else "`llmperf bench` result"


def _names(runs: Sequence[SavedRun]) -> str:
    return ", ".join(f"{r.server} @ {r.concurrency}" for r in runs)
