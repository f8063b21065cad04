"""PerfSession: one pytest session's servers, runs, baselines and verdicts.

plugin.py creates one and hands it to fixtures; everything here is plain Python so
it can be tested without pytest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_llmperf import __version__
from pytest_llmperf.baselines.compare import (
    Spread,
    Status,
    change_error,
    check_compatible,
    compare_metrics,
    incompatibility_message,
    median_of,
    other_workload_message,
    pooled_spread,
    wanting_another,
)
from pytest_llmperf.baselines.crosscheck import OutputChange, compare_outputs
from pytest_llmperf.baselines.history import OFF as HISTORY_OFF
from pytest_llmperf.baselines.history import append as append_history
from pytest_llmperf.baselines.history import default_path as history_default_path
from pytest_llmperf.baselines.history import make_record as history_record
from pytest_llmperf.baselines.history import workload_hash as history_workload_hash
from pytest_llmperf.baselines.store import PUBLISHED_DIR, BaselineError, BaselineStore, sanitize_name, workload_key
from pytest_llmperf.measured import MeasuredRun, Samples
from pytest_llmperf.metrics.crosscheck import encode_outputs, output_rows
from pytest_llmperf.metrics.failures import ErrorBudget, combine, failures, faults_note, parse_budget, stalls
from pytest_llmperf.metrics.goodput import parse_slos
from pytest_llmperf.metrics.prometheus import NOT_SPECULATIVE
from pytest_llmperf.metrics.registry import GATED_DECODE, REASONING_METRICS, Tolerance, flatten, metric
from pytest_llmperf.metrics.uncertainty import (
    decode_rows,
    encode_rows,
    independent_blocks,
    paired_errors,
    request_rows,
)
from pytest_llmperf.options import TARGET_FLAGS, LlmperfOptions
from pytest_llmperf.report.crosscheck import canary_failure, check_lines, output_change_reason, token_mismatch
from pytest_llmperf.report.explain import explanation
from pytest_llmperf.report.table import format_verdict_table, verdict_line
from pytest_llmperf.servers.base import ServerTarget
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import combine_peaks
from pytest_llmperf.servers.pool import ServerPool
from pytest_llmperf.servers.readiness import why_down
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.files import token_counts_dir, write_problem
from pytest_llmperf.util.limits import open_files_for, open_files_limit
from pytest_llmperf.util.secrets import redact_text
from pytest_llmperf.util.signals import TERMINATE
from pytest_llmperf.workload.config import RunConfig
from pytest_llmperf.workload.prompts import BUILTIN, random_length_mismatch
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import RunResult, describe_warmup, plural, warmup_figures
from pytest_llmperf.workload.workload import Workload

NO_FAILURES = ErrorBudget(0.0)

# Auto repetitions record this many runs: enough for the spread between runs to be known.
RECORD_REPETITIONS = 5
# A server that died: this many of its last log lines go into the invalid-run message.
SERVER_LOG_LINES = 20


# A simulated run whose engine steps ended on average more than half a step late measured
# the host's load, not the server (RunResult.engine_lag; about 0.05-0.2 on a loaded 2-core
# machine at x10).
MAX_ENGINE_LAG = 0.5
# Likewise the measuring client's event loop (RunResult.client_lag_share; about 0.001 on
# the same machine). Its latest 5 % of probes are left out (LagProbe.TRIM_SHARE): on a
# 1.5 s run one 100 ms stall is a mean of 60 % of a 5 ms gap; this project's own suite
# read 0.64 and 0.90 on such runs on a VM with I/O wait, and passed them alone.
MAX_CLIENT_LAG = 0.5
# Chunks read in one piece with the one before (RunResult.burst_share): a share of the gaps
# between chunks beyond this says a proxy or a late client buffered them. The simulator
# at 32 streams on a 2-core machine reads 0.0, held 4 at a time (--sim-burst-chunks 4) 0.75.
MAX_BURST_SHARE = 0.25


class PerfFailure(AssertionError):
    """A gated metric regressed, has no data, or has no comparable baseline. The message
    is the verdict table; `headline` says it in one line (pytest's short test summary)."""

    def __init__(self, message: str, headline: str | None = None) -> None:
        super().__init__(message)
        self.headline = headline or next(iter(message.splitlines()), "")


class HistoryWarning(UserWarning):
    """The history file could not be written (the verdict stands)."""


class InconclusiveWarning(UserWarning):
    """A gated metric the noise could not decide (--llmperf-inconclusive warn)."""


class Outcome(str, Enum):
    """What one assertion came to."""

    PASS = "pass"
    WARN = "warn"  # inconclusive under --llmperf-inconclusive warn
    FAIL = "fail"
    RECORDED = "recorded"  # --update-baselines
    REFUSED = "refused"  # the baseline was recorded under another workload or hardware

    def __str__(self) -> str:
        return self.value


@dataclass
class GateRecord:
    """One assertion's outcome, for the terminal summary and the JSON report."""

    nodeid: str
    server: str
    concurrency: int
    baseline_path: str
    verdicts: list[Any] = field(default_factory=list)
    outcome: Outcome = Outcome.PASS
    message: str = ""
    # The baseline entry judged against (None: none), for the reports' plots and blocks.
    baseline_figures: dict[str, float] | None = None
    baseline_provenance: dict[str, Any] | None = None
    # Under a failing or improved table (report/explain.py): the provenance changes, the
    # split of the decode change, and the lines printed for both.
    changes: list[str] = field(default_factory=list)
    attribution: dict[str, Any] | None = None
    explanation: list[str] = field(default_factory=list)
    # Beside the verdict (report/crosscheck.py): the output canary, and cross-checks not run.
    checks: list[str] = field(default_factory=list)


def default_baseline_folder(kind: str, provenance: Mapping[str, Any]) -> str:
    """Where baselines live: per GPU model for GPUs, else per kind of target."""
    if provenance.get("gpu_name"):
        return str(provenance["gpu_name"])
    return kind


class SetupError(ValueError):
    """Input the session cannot run with, found before any server starts; the message
    names what is wrong and the fix."""


@dataclass(frozen=True)
class PlannedTest:
    """What one collected test will need, as far as collection can tell."""

    nodeid: str
    servers: tuple[ServerSpec, ...]  # its server, and its base server for a speedup
    workloads: tuple[Workload, ...] = ()  # empty: known only when it runs
    # Without workloads: the (dataset name, file) pairs its marker names (None: the options').
    datasets: tuple[tuple[str, str | None], ...] | None = None


def check_before_start(
    options: LlmperfOptions,
    rootdir: Path,
    plans: Sequence[PlannedTest],
    folders: Sequence[str] | None,
) -> dict[tuple[str, str | None], Any]:
    """Load the datasets and check them and the baseline files the `plans` will read, before
    any server starts: SetupError says what is wrong and how to fix it. Returns the loaded
    datasets by (name, path) for the session: those of the planned workloads, and the
    options' own for the tests whose workload is known only when they run. `folders`: the
    baseline folders the tests will be judged in; None when the folder is known only once a
    server runs (the GPU model): then every folder's file of each server is checked."""
    wanted = {dataset_source(options, w) for plan in plans for w in plan.workloads}
    for plan in plans:
        if plan.workloads:
            continue
        for name, path in plan.datasets or [(options.dataset_name, None)]:
            source = _source(options, name, path)
            if source != ("custom", None):  # a custom one without its file: its run says so
                wanted.add(source)
    loaded = {key: load_for_session(options, rootdir, *key) for key in sorted(wanted, key=str)}
    _check_prompts(loaded, plans, options)
    store = BaselineStore(rootdir / options.baselines_dir)
    _check_baselines(store, rootdir, plans, folders)
    if options.update_baselines:
        _check_writable(store, rootdir, plans, folders)
    return loaded


def dataset_source(options: LlmperfOptions, workload: Workload) -> tuple[str, str | None]:
    """The dataset `workload` reads, as (name, file): its own file, else --llmperf-dataset
    when that is its dataset's (--llmperf-dataset-name's); None: ShareGPT's default places
    (or, for the random dataset, no file)."""
    from pytest_llmperf.workload.prompts import dataset_key

    return _source(options, *dataset_key(workload))


def _source(options: LlmperfOptions, name: str, path: str | None) -> tuple[str, str | None]:
    if name == "random":
        return name, None
    return name, options.dataset if path is None and name == options.dataset_name else path


def _dataset_option(options: LlmperfOptions) -> str:
    return "--llmperf-dataset" if options.sources.get("llmperf_dataset") == "cli" else "ini option llmperf_dataset"


def load_for_session(options: LlmperfOptions, rootdir: Path, name: str, path: str | None) -> Any:
    """One dataset's file, loaded (None for the random dataset); SetupError says which
    setting named it, what is wrong and the fix."""
    from pytest_llmperf.workload.dataset import DatasetError, ShareGPTFile
    from pytest_llmperf.workload.prompts import load_dataset

    option = _dataset_option(options)
    from_option = path is not None and path == options.dataset and name == options.dataset_name
    given = f"{option} ({path})" if from_option else f"dataset_path={path!r}" if path is not None else "the dataset"
    kind = "a JSONL file of prompts" if name == "custom" else "a ShareGPT V3 JSON file"
    try:
        loaded = load_dataset(name, path, rootdir)
    except DatasetError as exc:
        fix = f"point {option if from_option else 'it'} at {kind}" if path is not None else ""
        raise SetupError(f"{given}: {exc}" + (f"; {fix}" if fix and "\n" not in str(exc) else "")) from None
    if isinstance(loaded, ShareGPTFile) and not loaded.conversations:
        raise SetupError(
            f"dataset {loaded.path}: no conversation with two or more turns ({loaded.records} records read), "
            f"nothing to send; point {option} at a ShareGPT V3 JSON file"
        )
    return loaded


def _check_prompts(
    loaded: Mapping[tuple[str, str | None], Any], plans: Sequence[PlannedTest], options: LlmperfOptions
) -> None:
    """Every planned workload's prompts (measured, then distinct warm-up ones) exist at all:
    fewer conversations (or lines) than that cannot be sampled whatever the length filters
    keep. The random dataset makes as many as asked."""

    def have(workload: Workload) -> int | None:
        dataset = loaded.get(dataset_source(options, workload))
        if dataset is None:
            return None
        return len(dataset.prompts) if workload.dataset_name == "custom" else len(dataset.conversations)

    short = [
        (plan, w, n) for plan in plans for w in plan.workloads if (n := have(w)) is not None and w.prompts_needed > n
    ]
    if not short:
        return
    plan, workload, count = max(short, key=lambda pw: pw[1].prompts_needed)
    dataset = loaded[dataset_source(options, workload)]
    others = len({p.nodeid for p, _, _ in short}) - 1
    setting = _dataset_option(options) if workload.dataset_path is None else f"dataset_path={workload.dataset_path!r}"
    custom = workload.dataset_name == "custom"
    what = "prompts" if custom else "conversations"
    fix = f"add lines to the file ({setting})" if custom else f"point {setting} at a larger file"
    raise SetupError(
        f"{plan.nodeid} needs {workload.prompts_needed} prompts at concurrency {workload.concurrency} "
        f"({workload.num_prompts} measured + {workload.warmup} warm-up, profile {workload.profile}) but dataset "
        f"{dataset.path.name} has {count} {what}"
        + (f" ({others} more test(s) need more than it has)" if others else "")
        + f"; lower num_prompts= (or warmup=) in its llmperf marker, run a smaller --llmperf-profile, or {fix}"
    )


def _check_baselines(
    store: BaselineStore, rootdir: Path, plans: Sequence[PlannedTest], folders: Sequence[str] | None
) -> None:
    """Every baseline and published file the planned tests read loads: a corrupt or
    hand-broken one is named before the workload runs, not after."""
    if folders is None:
        folders = (
            sorted(p.name for p in store.root.iterdir() if p.is_dir() and p.name != PUBLISHED_DIR)
            if store.root.is_dir()
            else []
        )
    servers = sorted({spec.name for plan in plans for spec in plan.servers})
    problems = []
    for name in servers:
        for folder in folders:
            try:
                store.load(folder, name)
            except BaselineError as exc:
                problems.append(
                    f"baseline {_relative(exc.path, rootdir)}: {exc.problem}; the tests of {name} read it: "
                    "fix it, or delete it and record again with --update-baselines"
                )
        try:
            store.load_published(name)
        except BaselineError as exc:
            problems.append(
                f"published figures {_relative(exc.path, rootdir)}: {exc.problem}; fix it by hand "
                "(hand-curated, never recorded), or delete it"
            )
    if problems:
        raise SetupError("\n".join(problems))


def _check_writable(
    store: BaselineStore, rootdir: Path, plans: Sequence[PlannedTest], folders: Sequence[str] | None
) -> None:
    """Every baseline file --update-baselines will write can be written, before any server
    starts. `folders` None (known once a server runs): the baselines folder itself, and the
    files of every folder there is."""
    servers = sorted({spec.name for plan in plans for spec in plan.servers})
    checked: list[tuple[str, Path]] = []
    if folders is None:
        checked.append((f"baselines folder {_relative(store.root, rootdir)}", store.root / "new" / "file"))
        folders = sorted(p.name for p in store.root.iterdir() if p.is_dir()) if store.root.is_dir() else []
    for folder in folders:
        if folder != PUBLISHED_DIR:
            paths = [store.path_for(folder, name) for name in servers]
            checked += [(f"baseline {_relative(path, rootdir)}", path) for path in paths]
    problems = [f"{what} cannot be written: {why}" for what, path in checked if (why := write_problem(path))]
    if problems:
        raise SetupError("\n".join(problems) + "\n(--update-baselines: found before any server started)")


class PerfSession:
    # Auto repetitions judge from the second run on by the change as read (Verdict.more_data),
    # so a change read near the tolerance stops them; a paired session judges by the noise
    # alone at every look (paired.PairedSession, docs/verdicts.md).
    STOP_ON_CHANGE = True
    # A run is added only where the noise it can take off could decide (Verdict.decidable):
    # here the baseline's side is fixed, so only the measured side's spread falls with runs.
    # A paired session's sides both grow; it keeps the square-root rule.
    PROJECT_NOISE = True

    def __init__(
        self,
        options: LlmperfOptions,
        target: ServerTarget,
        rootdir: Path,
        *,
        ini_tolerances: Mapping[str, Tolerance] | None = None,
        datasets: Mapping[tuple[str, str | None], Any] | None = None,
        log: Callable[[str], None] = lambda msg: None,
        live_output: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.options = options
        self.target = target
        self.rootdir = Path(rootdir)
        self.log = log
        self.live_output = live_output  # lets the runner's progress line through pytest's capture
        self.pool = ServerPool(target, log=log)
        self.store = BaselineStore(self.rootdir / options.baselines_dir)
        self.ini_tolerances = dict(ini_tolerances or {})  # llmperf_tolerances, parsed by the plugin
        self.runs: dict[tuple[ServerSpec, Workload], MeasuredRun] = {}
        self.run_count = 0  # workloads actually executed (cache misses)
        self.added_seconds = 0.0  # wall time auto repetitions added (server starts and runs)
        self.clock: Callable[[], float] = time.perf_counter  # what added_seconds is measured with
        self.gates: list[GateRecord] = []
        # The loaded datasets by (name, path) (check_before_start's), others loaded on first use.
        self._datasets: dict[tuple[str, str | None], Any] = dict(datasets or {})
        self.token_count_source = ""
        # (model, dataset, its settings, seed, count): the prompts, for every server of the model.
        self._requests: dict[tuple[Any, ...], list[SampledRequest]] = {}
        # The random dataset's prompts by key: what made them to their lengths (prompts.SERVER, BUILTIN).
        self._random_made_by: dict[tuple[Any, ...], str | None] = {}
        # After failed requests: why the server is gone, or None while it serves.
        self.server_down: Callable[[Endpoint], str | None] = why_down
        self._warmed: Endpoint | None = None  # the started server the server-level warm-up ran on

    # -- measuring ---------------------------------------------------------------

    def _effective(self, spec: ServerSpec) -> ServerSpec:
        return spec.with_image(self.options.image) if self.options.image else spec

    def is_cached(self, spec: ServerSpec, workload: Workload) -> bool:
        return (self._effective(spec), workload) in self.runs

    def run(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """Measure `spec` under `workload`, once per session (later calls reuse it)."""
        spec = self._effective(spec)
        key = (spec, workload)
        if key in self.runs:
            return self.runs[key]
        endpoint = self.pool.endpoint(spec)
        requests = self._requests_for(endpoint, workload)
        speed = float(endpoint.provenance.get("clock_speed", 1.0))
        measured = MeasuredRun(
            server=spec,
            workload=workload,
            results=[],
            samples={},
            provenance=self._provenance(spec, endpoint, workload),
            published=self._published(spec, workload.concurrency),
            server_warmup=self._warm_server(spec, endpoint, requests, workload, speed),
        )
        self._check_warmed(measured, endpoint, measured.server_warmup)
        for rep in range(self.planned_repetitions if not measured.server_death else 0):
            if rep:
                endpoint = self._fresh_start(measured)
                if measured.server_death:  # during the fresh start's warm-up
                    break
            self._repeat(measured, endpoint, requests, speed)
            last = measured.results[-1]
            if last.partial or not last.completed or measured.server_death:  # nothing more to learn
                break
        self.run_count += 1
        self.runs[key] = measured
        self._stop_if_interrupted(measured)
        return measured

    def _warm_server(
        self, spec: ServerSpec, endpoint: Endpoint, requests: list[SampledRequest], workload: Workload, speed: float
    ) -> dict[str, float | None] | None:
        """The first use of a freshly started server: --llmperf-server-warmup requests sent at
        once (the server queues those beyond its batch), with the first run's max_tokens and
        endpoint, on prompts beyond its measured ones, so that compilation, graph capture,
        the allocator and caches are done before anything is measured. Its figures in real
        time (result.warmup_figures); None when the server was warm already or it is off."""
        if endpoint is self._warmed:
            return None
        self._warmed = endpoint
        count = self.options.server_warmup_for(spec.arg("--max-num-seqs"))
        if not count:
            return None
        from pytest_llmperf.workload.runner import warmup_prompts

        prompts = warmup_prompts(requests, workload.num_prompts, count)
        config = dataclasses.replace(
            workload.run_config(clock_speed=speed, progress=False), concurrency=count, num_prompts=None
        )
        self.log(f"{spec.name}: server warm-up, {plural(count, 'request')} at once (not measured)")
        with open_files_for(count):
            figures = warmup_figures(self._send_warmup(endpoint, prompts, config), speed)
        if figures:
            self.log(f"{spec.name}: server warm-up: {describe_warmup(figures)}")
        return figures

    @staticmethod
    def _send_warmup(endpoint: Endpoint, prompts: list[SampledRequest], config: RunConfig) -> dict[str, float] | None:
        from pytest_llmperf.workload.runner import run_warmup

        return run_warmup(endpoint.base_url, endpoint.model, prompts, config)

    @property
    def planned_repetitions(self) -> int:
        """Runs made up front: the count asked for; under auto one (RECORD_REPETITIONS when
        recording, so a baseline knows the spread between runs)."""
        reps = self.options.repetitions
        if reps == "auto":
            return min(RECORD_REPETITIONS, self.options.max_repetitions) if self.options.update_baselines else 1
        return int(reps)

    def _repeat(self, measured: MeasuredRun, endpoint: Endpoint, requests: list[SampledRequest], speed: float) -> None:
        """One more repetition of `measured`'s workload, added to it in place."""
        rep = len(measured.results)
        # The server's name, not its model's: a base and an MTP server share the model.
        self.log(
            f"{measured.server.name} @ concurrency {measured.concurrency}: {measured.workload.num_prompts} prompts"
        )
        with endpoint.sample_peak_memory() as peak:  # empty where the target has no GPUs
            result = self._execute(endpoint, requests, measured.workload, speed)
            behind = None if result.partial else host_behind([result])
            if behind:  # the host, not the server: once more, and judged on that one
                where = f"{measured.server.name} @ concurrency {measured.concurrency}"
                self.log(f"{where}: its host fell behind, the run is made again: {behind}")
                result = self._execute(endpoint, requests, measured.workload, speed)
                measured.notes.append(f"repetition {rep + 1} was made twice: the first time {behind.split(':')[0]}")
        warmed = result.warmup_figures()
        if warmed:
            self.log(f"{measured.server.name} @ concurrency {measured.concurrency}: warm-up {describe_warmup(warmed)}")
        measured.provenance.update(combine_peaks(measured.provenance, peak))  # the highest of the repetitions
        measured.results.append(result)
        summary = result.summary()
        # Why acceptance is missing matters only where acceptance is expected: by status, a
        # base server's "not speculative" is no news.
        expected = measured.server.is_speculative or summary.spec_status not in (None, NOT_SPECULATIVE)
        notes = [*summary.notes, *([summary.spec_note] if summary.spec_note and expected else [])]
        measured.spec_note = summary.spec_note
        measured.notes += [note for note in notes if note not in measured.notes]
        flat = flatten(summary.to_dict())
        for name in set(flat) | set(measured.samples):
            measured.samples.setdefault(name, [None] * rep).append(flat.get(name))
        if rep == 0:
            measured.rows[:] = request_rows(result.records, clock_speed=speed)
        if not result.partial and failures(result.records).failed:
            self._check_alive(measured, endpoint)

    def _check_alive(self, measured: MeasuredRun, endpoint: Endpoint, during: str | None = None) -> None:
        """Requests failed: if the server is gone, the run says so, with its last log lines,
        and the server is retired (later tests of it fail at once instead of running
        against a corpse). `during`: what was running when they failed, when not the run."""
        down = self.server_down(endpoint)
        if down is None:
            return
        when = during or f"after {measured.completed} of {measured.attempted} requests"  # of the measured runs
        measured.server_death = f"server died {when}: {down}"
        if endpoint.log_tail is not None:
            text = redact_text(endpoint.log_tail(SERVER_LOG_LINES), measured.server.secret_values())
            measured.server_log = [line for line in text.splitlines() if line.strip()][-SERVER_LOG_LINES:]
        self.log(measured.server_death)
        self.pool.retire(measured.server, measured.server_death)

    def _worth_another(self, run: MeasuredRun, verdicts: list[Any], first_look: bool = False) -> str | None:
        """Why auto repetitions add a run (for the log line), or None to stop: some verdict
        is inconclusive and could be decided within the budget (Verdict.decidable: by the
        part of its noise that more measured runs take off, PROJECT_NOISE, or as the square
        root of the runs), or is regressed at the gate's `first_look` (its first judgement,
        on the runs made before it) and is read again before it is reported
        (compare.wanting_another). After one run, an
        inconclusive one is judged by the noise alone (Verdict.resolution): one run's change
        may sit anywhere in its noise (a true 5 % drop read as 2.5 % can neither pass nor
        regress; only the median of more runs moves it). From the second on, by the change
        too (Verdict.more_data). A verdict that would need more runs than the budget allows
        stays inconclusive at the cost of what ran. A paired session judges by the noise
        alone at every look (STOP_ON_CHANGE)."""
        if self.options.repetitions != "auto":
            return None
        runs, budget = len(run.results), self.options.max_repetitions
        asking = wanting_another(
            verdicts,
            runs,
            budget,
            by_change=self.STOP_ON_CHANGE and runs >= 2,
            project=self.PROJECT_NOISE,
            confirm=first_look,
        )
        if not asking:
            return None
        regressed = [v.metric for v in verdicts if v.metric in asking and v.status == Status.REGRESSED]
        return f"{', '.join(regressed)} regressed at the first look, read again" if regressed else "inconclusive"

    def extend(self, measured: MeasuredRun, why: str = "inconclusive") -> bool:
        """Auto repetitions: one more run of `measured` on its server, `why` said in the log.
        False when the budget is spent or the run was interrupted."""
        if not self._can_extend(measured):
            return False
        started = self.clock()
        self.log(
            f"{measured.server.name} @ concurrency {measured.concurrency}: {why}, repetition "
            f"{len(measured.results) + 1} of at most {self.options.max_repetitions}"
        )
        endpoint = self._fresh_start(measured)
        if measured.server_death:  # during the fresh start's warm-up
            self.added_seconds += self.clock() - started
            return False
        requests = self._requests_for(endpoint, measured.workload)
        try:
            self._repeat(measured, endpoint, requests, float(endpoint.provenance.get("clock_speed", 1.0)))
        finally:
            self.added_seconds += self.clock() - started
        self._stop_if_interrupted(measured)
        return True

    def _can_extend(self, measured: MeasuredRun) -> bool:
        """Whether auto repetitions may add a run to `measured`: within --llmperf-max-repetitions
        and the session's --llmperf-repetition-budget (a spent budget is noted on the run), and
        nothing broke or was interrupted."""
        if self.options.repetitions != "auto" or len(measured.results) >= self.options.max_repetitions:
            return False
        if any(r.partial or not r.completed for r in measured.results) or measured.server_death:
            return False
        budget = self.options.repetition_budget
        if budget is not None and self.added_seconds >= budget:
            note = (
                f"auto repetitions stopped: the session's --llmperf-repetition-budget "
                f"({budget:g} s) is spent ({self.added_seconds:.0f} s added)"
            )
            self.log(f"{measured.server.name} @ concurrency {measured.concurrency}: {note}")
            if note not in measured.notes:
                measured.notes.append(note)
            return False
        return True

    def _fresh_start(self, measured: MeasuredRun) -> Endpoint:
        """The server for a repetition after the first: started afresh, so the spread
        between repetitions holds what moves between server starts (docs/verdicts.md);
        the same one under --llmperf-same-server, or where nobody starts it (external)."""
        if self.options.same_server or self.options.target == "external":
            return self.pool.endpoint(measured.server)
        self.log(f"restarting server {measured.server.name} for repetition {len(measured.results) + 1}")
        endpoint = self.pool.restart(measured.server)
        # A fresh start is as cold as the first: warmed the same way (its figures are logged).
        requests = self._requests_for(endpoint, measured.workload)
        speed = float(endpoint.provenance.get("clock_speed", 1.0))
        self._check_warmed(
            measured, endpoint, self._warm_server(measured.server, endpoint, requests, measured.workload, speed)
        )
        return endpoint

    def _check_warmed(self, measured: MeasuredRun, endpoint: Endpoint, warm: Mapping[str, float | None] | None) -> None:
        """Warm-up requests failed: a server that died warming up is a dead server."""
        failed = (warm or {}).get("failed")
        if failed:
            sent = (warm or {}).get("requests") or 0
            self._check_alive(measured, endpoint, during=f"during its warm-up ({failed:g} of {sent:g} failed)")

    @staticmethod
    def _stop_if_interrupted(measured: MeasuredRun) -> None:
        if any(result.partial for result in measured.results):
            # The runner turned Ctrl-C into a partial result; keep it for the report, then
            # stop the session as pytest does on Ctrl-C instead of moving to the next test.
            by = " by SIGTERM" if TERMINATE.received else ""
            raise KeyboardInterrupt(
                f"interrupted{by} during {measured.server.name} @ concurrency {measured.concurrency}"
            )

    def _execute(
        self, endpoint: Endpoint, requests: list[SampledRequest], workload: Workload, speed: float
    ) -> RunResult:
        from pytest_llmperf.workload.runner import run_benchmark

        # The simulator's clock runs `speed` times faster: so does the cap.
        config = workload.run_config(clock_speed=speed)
        with open_files_for(workload.concurrency) as raised:
            if raised is not None:
                self.log(
                    f"open files: soft limit raised from {raised[0]} to {raised[1]} for concurrency "
                    f"{workload.concurrency} (hard limit {open_files_limit()[1]}), for this run"
                )
            with self.live_output():
                # The result and the progress line in real time.
                return run_benchmark(endpoint.base_url, endpoint.model, requests, config, clock_speed=speed)

    def _dataset_for(self, workload: Workload) -> Any:
        """The loaded dataset of `workload` (None: the random dataset's, nothing to load)."""
        key = dataset_source(self.options, workload)
        if key not in self._datasets:  # check_before_start loads those it can plan; the rest here
            if key[0] != "random":
                self.log(f"loading dataset {key[0]} {key[1] or '(default places)'}")
            self._datasets[key] = load_for_session(self.options, self.rootdir, *key)
        return self._datasets[key]

    def _requests_for(self, endpoint: Endpoint, workload: Workload) -> list[SampledRequest]:
        """The same prompts for every server of a model: base and MTP see identical input."""
        from pytest_llmperf.workload.dataset import DatasetError, NotEnoughPromptsError
        from pytest_llmperf.workload.prompts import random_prompts, sample_prompts
        from pytest_llmperf.workload.token_counts import token_counter_for

        count = workload.prompts_needed
        key = self._requests_key(endpoint, workload)
        if key not in self._requests:
            dataset = self._dataset_for(workload)
            counter, source = token_counter_for(
                endpoint.base_url,
                endpoint.model,
                cache_dir=token_counts_dir(),
                dataset_id=dataset.sha256 if dataset is not None else "random",
            )
            if dataset is None:  # the random dataset: made to the server's counts where it has /tokenize
                server = counter if source == "server" else None
                self._requests[key], self._random_made_by[key] = random_prompts(workload, server_count=server)
                return self._requests[key]
            self.token_count_source = source
            try:
                self._requests[key] = sample_prompts(workload, dataset, counter)
            except NotEnoughPromptsError as exc:
                # Only the server's token counts tell how many pass the length filters.
                raise SetupError(
                    f"{endpoint.model} @ concurrency {workload.concurrency}: {count} prompts needed "
                    f"({workload.num_prompts} measured + {workload.warmup} warm-up) but only {exc.kept} of "
                    f"{exc.available} conversations in {dataset.path.name} pass the length filters "
                    f"({exc.filters}; tokens counted by {source}); lower num_prompts= (or warmup=) in the "
                    "llmperf marker, run a smaller --llmperf-profile, or point --llmperf-dataset at a larger file"
                ) from None
            except DatasetError as exc:
                raise SetupError(f"{endpoint.model} @ concurrency {workload.concurrency}: {exc}") from None
        return self._requests[key]

    def _requests_key(self, endpoint: Endpoint, workload: Workload) -> tuple[Any, ...]:
        """The prompts' key: the same prompts for every server of a model."""
        settings = (workload.random_input_len, workload.random_range_ratio, workload.random_prefix_len)
        per_request = workload.max_tokens if workload.per_request_max_tokens else None
        source = dataset_source(self.options, workload)
        return (endpoint.model, source, settings, per_request, workload.seed, workload.prompts_needed)

    def workload_identity(self, run: MeasuredRun) -> dict[str, Any]:
        """What must match for two runs to be comparable (hardware aside)."""
        from pytest_llmperf.workload.prompts import dataset_identity

        identity = dict(run.workload.to_dict())
        identity["model"] = run.server.model
        key = dataset_source(self.options, run.workload)
        if key in self._datasets or run.workload.dataset_name == "random":
            made_by = run.provenance.get("dataset", {}).get("tokenizer", BUILTIN)
            identity["dataset"] = dataset_identity(run.workload, self._datasets.get(key), made_by)
        if "clock_speed" in run.provenance:
            identity["clock_speed"] = run.provenance["clock_speed"]
        return identity

    def _provenance(self, spec: ServerSpec, endpoint: Endpoint, workload: Workload) -> dict[str, Any]:
        from pytest_llmperf.workload.prompts import dataset_provenance

        info = dict(endpoint.provenance)
        info.update(
            plugin_version=__version__,
            target=endpoint.target,
            server=spec.describe(),
            date=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            git_commit=self.git_commit,
        )
        key = dataset_source(self.options, workload)
        if key in self._datasets or workload.dataset_name == "random":
            # File name only: baselines are committed and must not carry this machine's paths.
            made_by = self._random_made_by.get(self._requests_key(endpoint, workload)) or BUILTIN
            info["dataset"] = dataset_provenance(workload, self._datasets.get(key), made_by)
            if workload.dataset_name != "random":
                info["prompt_length_source"] = self.token_count_source  # server /tokenize or approx
        return {k: v for k, v in info.items() if v is not None}

    @functools.cached_property
    def git_commit(self) -> str | None:
        return _git_commit(self.rootdir)

    def _published(self, spec: ServerSpec, concurrency: int) -> dict[str, float]:
        published = self.store.load_published(spec.name)
        return published.figures(concurrency) if published else {}

    # -- judging -----------------------------------------------------------------

    def baseline_folder(self, run: MeasuredRun) -> str:
        """The folder of baselines/ this run is judged in: --llmperf-target-name, else per GPU
        model, else the target kind."""
        return self.options.target_name or default_baseline_folder(self.target.name, run.provenance)

    def update_command(self, nodeid: str) -> str:
        flag = TARGET_FLAGS.get(self.options.target or "", "")
        if self.options.target == "external":
            flag += f" {self.options.base_url}"
        extra = f" --llmperf-profile {self.options.profile}" if self.options.profile != "full" else ""
        return f"pytest '{nodeid}' {flag}{extra} --update-baselines".replace("  ", " ")

    def bind(
        self,
        run: MeasuredRun,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget | str | None = None,
    ) -> MeasuredRun:
        """`run` (cached, shared between tests) as one test sees it: its assertions are
        judged for `nodeid` with the test's marker tolerances and error budget (else
        --llmperf-error-budget)."""
        judge = functools.partial(
            self.gate,
            nodeid=nodeid,
            marker_tolerances=dict(marker_tolerances or {}),
            error_budget=self.options.error_budget if error_budget is None else parse_budget(error_budget),
        )
        return dataclasses.replace(run, judge=judge)

    @staticmethod
    def invalid_reason(run: MeasuredRun, budget: ErrorBudget) -> str | None:
        """Why `run` cannot be judged, or None: its server died, failures beyond the budget,
        nothing completed, the client or the simulator fell behind, the server never ran
        the run's concurrency (metrics/concurrency.py), or its output tokens disagree
        between usage, the engine's counter and the client (metrics/crosscheck.py)."""
        broken = combine(failures(r.records, r.attempted) for r in run.results)
        if run.server_death:
            # Died before the measured window (during a warm-up): its death says it all.
            said = f"{run.server_death}; {broken.describe()}" if broken.attempted else run.server_death
            reason = f"{said}; the figures of a broken run judge nothing"
            if run.server_log:
                shown = "\n".join(f"    {line}" for line in run.server_log)
                reason += f"; its last {len(run.server_log)} log lines:\n{shown}"
            return reason
        if broken.failed and not budget.allows(broken.failed, broken.attempted):
            return (
                f"{broken.describe()}; error budget {budget} (--llmperf-error-budget or the marker's "
                "error_budget=); fix the server or the workload, the figures of a broken run judge nothing"
            )
        if not run.completed:
            return f"no request completed ({broken.describe()})" if broken.failed else "no request completed"
        if behind := host_behind(run.results):
            return behind
        if (bursts := _worst(r.burst_share() for r in run.results)) > MAX_BURST_SHARE:
            return (
                f"{bursts:.0%} of the gaps between chunks were 0 (bound {MAX_BURST_SHARE:.0%}): chunks "
                "arrived in bursts of already-buffered data, so their times are not when they were made; "
                "measure without a buffering proxy in between (or with one that flushes each event), and "
                "free the client's cores"
            )
        for result in run.results:  # a server without the running gauge is not checked
            reached = result.concurrency_reached()
            short = reached.shortfall() if reached is not None else None
            if short:
                return short
        for result in run.results:
            mismatch = token_mismatch(result.token_account())
            if mismatch:
                return mismatch
        return random_length_mismatch(run.workload, [r for result in run.results for r in result.records])

    def gate(
        self,
        run: MeasuredRun,
        collect: Callable[[], Samples],
        tolerances: Mapping[str, str] | None = None,
        base: MeasuredRun | None = None,
        *,
        nodeid: str,
        marker_tolerances: Mapping[str, str] | None = None,
        error_budget: ErrorBudget = NO_FAILURES,
    ) -> None:
        """Judge (or record) for test `nodeid` the gated metrics' samples that `collect()`
        returns; auto repetitions call it again after each added run. `tolerances` (the
        assertion's) take precedence over `marker_tolerances` (the test's marker). A run
        beyond its error budget is invalid: never recorded, never passed."""
        tolerances = {**(marker_tolerances or {}), **(tolerances or {})}
        samples = collect()
        invalid = self._gate_invalid(run, base, error_budget)
        target = self.baseline_folder(run)
        path = self.store.path_for(target, run.server.name)
        workload = self.workload_identity(run)
        command = self.update_command(nodeid)
        record = GateRecord(nodeid, run.server.name, run.concurrency, _relative(path, self.rootdir))
        self.gates.append(record)

        if self.options.update_baselines:
            if invalid:
                record.outcome = Outcome.FAIL
                record.message = (
                    f"{run.server.name} @ concurrency {run.concurrency}: not recorded: invalid run: {invalid}"
                )
                raise PerfFailure(record.message)
            missing = [name for name, values in samples.items() if all(v is None for v in values)]
            provenance = dict(run.provenance)
            if base is not None:
                provenance["speedup_base"] = {
                    "server": base.server.name,
                    "vllm_version": base.provenance.get("vllm_version"),
                }
            # A run's own figures are all recorded, so later assertions on any of them find a
            # baseline; a speedup adds only itself.
            metrics = dict(samples) if base is not None else {**run.samples, **samples}
            self.store.record(
                target,
                run.server.name,
                run.concurrency,
                metrics,
                workload,
                provenance,
                requests=encode_rows(run.rows) if base is None else None,
                outputs=encode_outputs(output_rows(run.results[0].records)) if base is None and run.results else None,
            )
            self._append_history(
                run, target, workload, [(n, median_of(samples[n]), "recorded", None, None, None) for n in samples]
            )
            recorded = [name for name in samples if name not in missing]
            record.outcome = Outcome.RECORDED
            record.message = f"recorded {', '.join(recorded) or 'nothing'} in {record.baseline_path}"
            if missing:
                record.outcome = Outcome.FAIL
                reasons = "; ".join(f"{name}: {self._no_data_reason(run, name)}" for name in missing)
                record.message += f"; not recorded, no data: {reasons}"
                raise PerfFailure(record.message)
            return

        entry = self._gate_entry(run, base, record=record, workload=workload, command=command, target=target)
        invalid, outputs = self._check_outputs(run, entry, record, invalid)
        looks = 0
        while True:
            entry = self._refresh_entry(entry, run, base)
            verdicts = self._verdicts(run, entry, collect(), tolerances, command, base, target, invalid)
            looks += 1
            why = None if invalid else self._worth_another(run, verdicts, first_look=looks == 1)
            if why is None or not self.extend(run, why):
                break
        record.verdicts = verdicts
        self._append_history(
            run,
            target,
            workload,
            [(v.metric, v.measured, v.status, v.noise, v.baseline, v.confidence) for v in verdicts],
        )
        title = self._gate_title(run, record, target)
        runs = [*run.results, *(base.results if base is not None else [])]
        faults = faults_note(
            (failures(r.records, r.attempted) for r in runs),
            (stalls(r.records, r.clock_speed) for r in runs),
            error_budget,
        )
        undecided = [v for v in verdicts if v.status == Status.INCONCLUSIVE]
        policy = self.options.inconclusive
        failing = [v for v in verdicts if not v.ok and (v.status != Status.INCONCLUSIVE or policy == "fail")]
        if entry is not None:
            record.baseline_figures = {name: m["value"] for name, m in entry["metrics"].items()}
            record.baseline_provenance = dict(entry["provenance"])
            if failing or any(v.status == Status.IMPROVED for v in verdicts):
                # An invalid run's figures explain nothing; what changed may (a new image that crashes).
                speculative = run.server.is_speculative and not invalid
                lines, changes, attribution = explanation(
                    entry["provenance"], run.provenance, record.baseline_figures, run.figures, speculative
                )
                record.explanation = lines
                record.changes = [change.describe() for change in changes]
                record.attribution = attribution.to_dict() if attribution is not None else None
        record.message = format_verdict_table(
            verdicts, title=title, faults=None if invalid else faults, explanation=record.explanation
        )
        if record.checks:
            record.message += "\n" + "\n".join(record.checks)
        canary = None if invalid else canary_failure(outputs, self.options.changed_outputs)
        if canary:
            record.message += f"\n{canary}"
        spent = [note for note in run.notes if note.startswith("auto repetitions stopped")]
        if undecided and spent:
            record.message += f"\n{spent[0]}"
        if failing or canary:
            record.outcome = Outcome.FAIL
            raise PerfFailure(record.message, headline=verdict_line(failing) if failing else canary)
        if undecided and policy == "warn":
            record.outcome = Outcome.WARN
            warnings.warn(InconclusiveWarning(record.message), stacklevel=3)

    def history_path(self, target: str) -> Path | None:
        """Where this session's runs judged in baseline folder `target` append their history
        (baselines/history.py): --llmperf-history, else beside the baselines; None when off."""
        chosen = self.options.history
        if chosen is not None and chosen.strip().lower() == HISTORY_OFF:
            return None
        return self.rootdir / chosen if chosen else history_default_path(self.store.root, target)

    def _append_history(
        self,
        run: MeasuredRun,
        target: str,
        workload: Mapping[str, Any],
        judged: Sequence[tuple[str, float | None, str, float | None, float | None, float | None]],
    ) -> None:
        """One history line per judged (metric, value, outcome, noise, baseline, the confidence
        the noise is at) with a value.
        A history that cannot be written warns; it does not change the verdict."""
        path = self.history_path(target)
        if path is None:
            return
        reps = max((len(v) for v in run.samples.values()), default=0) or None
        key = history_workload_hash(workload)
        lines = [
            line
            for name, value, outcome, noise, baseline, confidence in judged
            if (
                line := history_record(
                    server=run.server.name,
                    concurrency=run.concurrency,
                    metric=name,
                    value=value,
                    outcome=str(outcome),
                    target=target,
                    provenance=run.provenance,
                    workload=key,
                    noise=noise,
                    confidence=confidence,
                    baseline=baseline,
                    reps=reps,
                )
            )
        ]
        try:
            append_history(path, lines)
        except OSError as exc:
            warnings.warn(HistoryWarning(f"history {path}: not written: {exc}"), stacklevel=4)

    def _check_outputs(
        self, run: MeasuredRun, entry: Mapping[str, Any] | None, record: GateRecord, invalid: str | None
    ) -> tuple[str | None, OutputChange | None]:
        """The run's outputs against the baseline entry's (baselines/crosscheck.py): the canary's
        line and the checks not run go on `record`; returns why the run is invalid (`invalid`
        as given, else output lengths or the EOS share moved beyond their bounds) and the change."""
        if entry is None or not run.results:
            return invalid, None
        change = compare_outputs(entry, run.rows, output_rows(run.results[0].records))
        record.checks = check_lines(change, "requests" in entry, "outputs" in entry, self.options.changed_outputs)
        return invalid or output_change_reason(change), change

    def _gate_invalid(self, run: MeasuredRun, base: MeasuredRun | None, budget: ErrorBudget) -> str | None:
        """Why the gate cannot judge: the run's or its base run's invalid_reason."""
        return self.invalid_reason(run, budget) or (self.invalid_reason(base, budget) if base is not None else None)

    def _gate_entry(
        self,
        run: MeasuredRun,
        base: MeasuredRun | None,
        *,
        record: GateRecord,
        workload: Mapping[str, Any],
        command: str,
        target: str,
    ) -> Mapping[str, Any] | None:
        """The baseline entry `run` is judged against: the stored one of its workload (None:
        none). A stored entry of another workload or hardware is refused (PerfFailure)."""
        baseline = self.store.load(target, run.server.name)
        entry = baseline.entry(run.concurrency, workload) if baseline else None
        if entry is not None:
            differences = check_compatible(entry["workload"], workload, entry["provenance"], run.provenance)
            if differences:
                record.outcome = Outcome.REFUSED
                record.message = incompatibility_message(record.baseline_path, run.concurrency, differences, command)
                raise PerfFailure(record.message)
        elif baseline is not None and (others := baseline.others(run.concurrency, workload)):
            # Entries of other workloads only: say what differs rather than "missing".
            differences = min(
                (
                    check_compatible(other["workload"], workload, other["provenance"], run.provenance)
                    for other in others
                ),
                key=len,
            )
            record.outcome = Outcome.REFUSED
            record.message = other_workload_message(
                record.baseline_path, run.concurrency, differences, command, len(others)
            )
            raise PerfFailure(record.message)
        return entry

    def _refresh_entry(
        self, entry: Mapping[str, Any] | None, run: MeasuredRun, base: MeasuredRun | None
    ) -> Mapping[str, Any] | None:
        """The entry to judge against after auto repetitions added runs: a stored one does
        not change (paired.py's is rebuilt from the runs it grew)."""
        return entry

    def _gate_title(self, run: MeasuredRun, record: GateRecord, target: str) -> str:
        title = f"{run.server.name} @ concurrency {run.concurrency} vs {record.baseline_path} [{target}]"
        if len(run.results) > 1:
            title += f" ({len(run.results)} repetitions)"
        return title

    def _base_entry(self, base: MeasuredRun, target: str) -> Mapping[str, Any] | None:
        """The entry a speedup's base run is judged against (for the speedup's noise)."""
        base_file = self.store.load(target, base.server.name)
        return base_file.entry(base.concurrency, self.workload_identity(base)) if base_file else None

    def _verdicts(
        self,
        run: MeasuredRun,
        entry: Mapping[str, Any] | None,
        samples: Mapping[str, list[float | None]],
        tolerances: Mapping[str, str] | None,
        command: str,
        base: MeasuredRun | None,
        target: str,
        invalid: str | None = None,
    ) -> list[Any]:
        measured = {name: median_of(values) for name, values in samples.items()}
        no_data = {name: self._no_data_reason(run, name) for name in samples if measured.get(name) is None}
        # The fewest requests a run on either side completed: statistics over requests from
        # fewer than the registry's min_requests are not judged.
        counts = [r.completed for r in run.results]
        if entry:
            counts += [c for c in entry["metrics"].get("completed", {}).get("samples", ()) if c is not None]
        return compare_metrics(
            list(samples),
            entry["metrics"] if entry else None,
            measured,
            overrides=(tolerances, self.ini_tolerances),
            update_command=command,
            no_data_reasons=no_data,
            confidence=self.options.alarm_confidence,
            pass_confidence=self.options.confidence,
            invalid=invalid,
            requests=int(min(counts)) if counts else None,
            **self._noise(run, entry, samples, base, target),
        )

    @staticmethod
    def _no_data_reason(run: MeasuredRun, name: str) -> str:
        """Why this metric in particular has no value: each its own reason."""
        if not run.completed:
            return "no request completed"
        if metric(name).name.startswith("acceptance"):
            return run.spec_note or "the server's spec-decode counters gave no figure"
        if name == "mtp_speedup":
            return "decode tok/s is missing on this run or on its base run"
        if name in REASONING_METRICS and run.value("answered") is None:
            return (
                "no reply carried reasoning: it needs a chat run (endpoint='chat') of a server that streams "
                "reasoning (vLLM with --reasoning-parser)"
            )
        if name.startswith("ttfa_ms") and not run.value("answered"):
            return "no reply got past its reasoning to answer text: raise max_tokens"
        if name in ("request_goodput", "slo_attainment") and not run.workload.slos:
            return (
                "no SLOs were given, so there is no goodput: set slos='ttft:500 tpot:50' (ms) in the llmperf "
                "marker or --llmperf-slos for the session"
            )
        return "; ".join(run.notes) or f"the run produced no value for {name}"

    def _noise(
        self,
        run: MeasuredRun,
        entry: Mapping[str, Any] | None,
        samples: Mapping[str, list[float | None]],
        base: MeasuredRun | None,
        target: str,
    ) -> dict[str, Any]:
        """The standard error of each gated metric's change, and notes on how it was had."""
        if not entry:
            return {}
        recorded = entry["metrics"]
        if base is None:
            paired, blocks = self._paired(run, entry, list(samples))
        else:  # the speedup: each server's decode change against its own baseline
            mine, blocks = self._paired(run, entry, [GATED_DECODE])
            base_entry = self._base_entry(base, target)
            theirs, base_blocks = self._paired(base, base_entry, [GATED_DECODE])
            blocks = min(blocks, base_blocks)
            speedup = median_of(samples.get("mtp_speedup", []))
            ours, their = run.value(GATED_DECODE), base.value(GATED_DECODE)
            paired = {}
            if speedup and ours and their and GATED_DECODE in mine and GATED_DECODE in theirs:
                paired["mtp_speedup"] = (
                    speedup * ((mine[GATED_DECODE] / ours) ** 2 + (theirs[GATED_DECODE] / their) ** 2) ** 0.5
                )
        errors, notes = {}, {}
        pools = self._spread_pools(target, run, list(samples))
        for name, values in samples.items():
            old = recorded.get(name)
            errors[name] = change_error(
                paired.get(name),
                old["samples"] if old else (),
                values,
                paired_dof=max(blocks - 1, 1),
                pool=pools.get(name),
            )
            if "requests" not in entry and errors[name] is None:
                # with a spread between repetitions known, the request lines would not be read
                notes[name] = (
                    "the baseline has no per-request figures (recorded by an older version): judged on the "
                    "tolerance alone; re-record it to judge against the request-level noise"
                )
        return {"errors": errors, "notes": notes}

    def _spread_pools(self, target: str, run: MeasuredRun, names: list[str]) -> dict[str, Spread]:
        """Per metric, the between-start spread recorded in the other cells of this target at
        this concurrency (the other servers' baselines, and this server's other workloads):
        the same box and engine move every server's runs alike in relative terms, so their
        repetitions tell this cell's spread on far more degrees of freedom than its own five
        (docs/verdicts.md)."""
        return spread_pools(self.stored_cells(target, run, own=False), names)

    def stored_cells(self, target: str, run: MeasuredRun, *, own: bool) -> list[Mapping[str, list[float | None]]]:
        """Each entry recorded at `run`'s concurrency in `target`'s folder, as its metrics'
        per-repetition samples; `own`: with the entry of `run`'s own server and workload."""
        mine = (sanitize_name(run.server.name), workload_key(self.workload_identity(run)))
        return [
            {name: m["samples"] for name, m in entry["metrics"].items() if "samples" in m}
            for server, key, entry in self.store.entries_at(target, run.concurrency)
            if own or (sanitize_name(server), key) != mine
        ]

    @staticmethod
    def _paired(run: MeasuredRun, entry: Mapping[str, Any] | None, names: list[str]) -> tuple[dict[str, float], int]:
        """The paired request-level errors of `names` against the baseline entry, and the
        independent blocks they rest on; nothing without the baseline's request lines."""
        if not entry or "requests" not in entry or not run.rows:
            return {}, 0
        rows = decode_rows(entry["requests"])
        figures = {name: m["value"] for name, m in entry["metrics"].items()}
        slos = parse_slos(run.workload.slos) if run.workload.slos else None  # the baseline's too: same workload
        errors = paired_errors(rows, run.rows, figures, run.figures, names, concurrency=run.concurrency, slos=slos)
        return errors, independent_blocks(rows, run.rows, run.concurrency)

    def close(self) -> None:
        self.pool.stop()


def spread_pools(cells: Sequence[Mapping[str, list[float | None]]], names: list[str]) -> dict[str, Spread]:
    """Per metric of `names`, the relative spread between starts pooled over the `cells`
    (each a mapping of metric -> repetitions) that have it; a metric none has is left out."""
    pools = {}
    for name in names:
        spread = pooled_spread(cell[name] for cell in cells if name in cell)
        if spread is not None:
            pools[name] = spread
    return pools


def host_behind(results: Sequence[RunResult]) -> str | None:
    """Why `results` measured their host rather than the server, with what to do: the
    measuring client's event loop (RunResult.client_lag_share) or the simulator's engine
    loop (RunResult.engine_lag) fell behind beyond its bound, in the worst of them; None
    when both kept up or were not measured. A busy host is not the server: a run it
    spoiled is made once more before it is judged (PerfSession._repeat)."""
    if (behind := _worst(r.client_lag_share() for r in results)) > MAX_CLIENT_LAG:
        return (
            f"the measuring client's event loop ran on average {behind:.0%} of a gap between chunks "
            f"late, its latest probes aside (bound {MAX_CLIENT_LAG:.0%}): chunks were timestamped late; "
            "free the cores, or spread the streams over client processes (RunConfig.workers)"
        )
    if (lag := _worst(r.engine_lag() for r in results)) > MAX_ENGINE_LAG:
        return (
            f"the simulator's engine loop ran {lag:.0%} of a step behind its schedule (bound "
            f"{MAX_ENGINE_LAG:.0%}): the host was too busy for its clock speed x{results[0].clock_speed:g}; "
            "free the cores or lower --llmperf-sim-speed"
        )
    return None


def _worst(values: Iterable[float | None]) -> float:
    """The largest of `values` not None; 0.0 when none is (every bound it is held to is above 0)."""
    return max((v for v in values if v is not None), default=0.0)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
