"""`llmperf compare A B`: B's saved runs judged by the gate against A's, each saved run of
A a Reference as a baseline entry is (no auto repetitions, no history, nothing recorded).
report/saved.py reads and pairs the files and puts the judgements in words."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.baselines.compare import DEFAULT_ALARM_CONFIDENCE, DEFAULT_CONFIDENCE
from pytest_llmperf.baselines.entry import BaselineEntry
from pytest_llmperf.baselines.judgement import Judgement
from pytest_llmperf.baselines.store import BaselineStore
from pytest_llmperf.baselines.tolerances import parse_tolerance_overrides
from pytest_llmperf.judging.gate import Gate, NoMoreRuns
from pytest_llmperf.judging.reference import Reference
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.metrics.crosscheck import encode_outputs
from pytest_llmperf.metrics.failures import ErrorBudget
from pytest_llmperf.metrics.registry import Tolerance
from pytest_llmperf.metrics.uncertainty import decode_rows, encode_rows
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.report.saved import SavedError, SavedRun, compare_text, gated_metrics, paired_runs
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import Workload

SAVED = "saved"  # the gate's kind name for saved runs (no baseline folder is read or written)


class SavedReference(Reference):
    """A's saved run as the entry B's is judged against; the invalid reasons are those read
    from the files (report/saved.py), A's named as A's."""

    keeps_history = False
    recorded = False

    def __init__(self, options: LlmperfOptions, a: SavedRun, b: SavedRun, title: str) -> None:
        self.options = options
        self.a = a
        self.b = b
        self.label = title

    def entry(self, run: MeasuredRun, base: MeasuredRun | None, baseline_folder: str) -> BaselineEntry:
        a = self.a
        return BaselineEntry(
            workload=a.identity,
            provenance=a.hardware,
            metrics={name: {"value": value, "samples": a.samples.get(name, [])} for name, value in a.figures.items()},
            requests=encode_rows(a.rows) if a.rows else None,
            outputs=encode_outputs(a.outputs) if a.rows else None,
        )

    def title(self, run: MeasuredRun, where: str, baseline_folder: str) -> str:
        return self.label

    def invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        return self.b.invalid or (f"A: {self.a.invalid}" if self.a.invalid else None)

    def update_command(self, nodeid: str) -> str:
        return ""  # nothing is recorded from a comparison


def measured_run(saved: SavedRun) -> MeasuredRun:
    """A saved run as the gate judges a measured one."""
    identity = saved.identity
    server = ServerSpec(
        name=saved.server,
        model=str(identity.get("model") or saved.server),
        speculative_config={"method": "as saved"} if saved.speculative else None,
    )
    workload = Workload(
        concurrency=saved.concurrency,
        num_prompts=int(identity.get("num_prompts") or 0),
        max_tokens=int(identity.get("max_tokens") or 0),
        max_seconds=None,
        warmup=0,
        slos=str(identity.get("slos") or ""),
    )
    samples = saved.samples or {name: [value] for name, value in saved.figures.items()}
    return MeasuredRun(
        server=server,
        workload=workload,
        results=list(saved.results),
        samples={name: list(values) for name, values in samples.items()},
        provenance=dict(saved.hardware),
        rows=decode_rows(encode_rows(saved.rows)),  # as A's: two identical files are judged without noise
    )


def judge_saved(
    a: SavedRun,
    b: SavedRun,
    title: str,
    options: LlmperfOptions,
    names: Sequence[str],
    tolerances: dict[str, Tolerance],
) -> Judgement:
    """B against A by the gate: one look, a change claimed at the alarm confidence, a pass at the pass confidence."""
    reference = SavedReference(options, a, b, title)
    gate = Gate(
        options,
        BaselineStore(Path(options.baselines_dir)),  # never read nor written: the reference is A
        Path.cwd(),
        reference,
        NoMoreRuns(),
        lambda run: dict(b.identity),
        kind_name=SAVED,
        ini_tolerances=tolerances,
    )
    run = measured_run(b)
    return gate.judge(run, lambda: {name: run.samples.get(name, [None]) for name in names}, nodeid=title)


def compare_files(
    a_path: Path,
    b_path: Path,
    *,
    metrics: Sequence[str] = (),
    tolerances: Sequence[str] = (),
    confidence: float = DEFAULT_CONFIDENCE,
    alarm_confidence: float = DEFAULT_ALARM_CONFIDENCE,
) -> tuple[str, bool]:
    """The text of B judged against A and whether every verdict passed. SavedError when
    a file cannot be read, the kinds differ, nothing pairs, or a workload differs."""
    try:
        overrides = parse_tolerance_overrides(",".join(tolerances))
    except ValueError as exc:
        raise SavedError(f"--tolerance: {exc}") from None
    pairs, notes = paired_runs(a_path, b_path)
    options = LlmperfOptions(target=None, history="off", confidence=confidence, alarm_confidence=alarm_confidence)
    judgements = [
        judge_saved(
            a,
            b,
            f"{b.server} @ concurrency {b.concurrency}: B {b_path} against A {a_path} (the baseline column)",
            options,
            gated_metrics(a, b, metrics),
            overrides,
        )
        for a, b in pairs
    ]
    return compare_text(judgements, notes)
