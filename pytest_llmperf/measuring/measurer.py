"""Measuring: runs, repetitions, server warm-ups and fresh starts.

The Runner and Sampler are injected (tests pass fakes); how many runs, on which servers,
is a RepetitionPolicy: `Repetitions` here, `paired.PairedBlocks` for paired A/B.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import subprocess
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from pytest_llmperf import __version__
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.measuring.prompt_book import PromptBook, Sampler
from pytest_llmperf.measuring.validity import host_behind
from pytest_llmperf.metrics.failures import failures
from pytest_llmperf.metrics.prometheus import NOT_SPECULATIVE
from pytest_llmperf.metrics.registry import FAILED, flatten
from pytest_llmperf.metrics.uncertainty import request_rows
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import combine_peaks
from pytest_llmperf.servers.pool import ServerPool
from pytest_llmperf.servers.readiness import why_down
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.limits import open_files_for, open_files_limit
from pytest_llmperf.util.secrets import redact_text
from pytest_llmperf.util.signals import TERMINATE
from pytest_llmperf.workload.config import RunConfig
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.result import RunResult, describe_warmup, plural, warmup_figures
from pytest_llmperf.workload.workload import Workload

# Auto repetitions record this many runs: enough for the spread between runs to be known.
RECORD_REPETITIONS = 5
# A server that died: this many of its last log lines go into the invalid-run message.
SERVER_LOG_LINES = 20
# A server's published figures (the vendor's, baselines/<server>.published.json) at a concurrency.
Published = Callable[[str, int], Mapping[str, float]]


class Runner(Protocol):
    """What sends a run's requests and times them."""

    def measure(
        self, endpoint: Endpoint, requests: list[SampledRequest], workload: Workload, speed: float, label: str = ""
    ) -> RunResult:
        """One measured run of `workload` on `endpoint` (`speed`: the simulator's clock speed;
        `label`: what its progress line names)."""
        ...

    def warmup(self, endpoint: Endpoint, prompts: list[SampledRequest], config: RunConfig) -> dict[str, float] | None:
        """A server warm-up: `prompts` sent at once, not measured; its figures."""
        ...


class HttpRunner:
    """The streaming HTTP client (workload/runner.py), with the open-files limit raised
    for the run and its progress line let through pytest's capture (`live_output`)."""

    def __init__(
        self,
        log: Callable[[str], None] = lambda msg: None,
        live_output: Callable[[], AbstractContextManager[Any]] = nullcontext,
    ) -> None:
        self.log = log
        self.live_output = live_output

    def measure(
        self, endpoint: Endpoint, requests: list[SampledRequest], workload: Workload, speed: float, label: str = ""
    ) -> RunResult:
        from pytest_llmperf.workload.runner import run_benchmark

        # the simulator's clock runs `speed` times faster: so does the cap
        config = dataclasses.replace(workload.run_config(clock_speed=speed), label=label)
        with open_files_for(workload.concurrency) as raised:
            if raised is not None:
                self.log(
                    f"open files: soft limit raised from {raised[0]} to {raised[1]} for concurrency "
                    f"{workload.concurrency} (hard limit {open_files_limit()[1]}), for this run"
                )
            with self.live_output():
                return run_benchmark(endpoint.base_url, endpoint.model, requests, config, clock_speed=speed)

    def warmup(self, endpoint: Endpoint, prompts: list[SampledRequest], config: RunConfig) -> dict[str, float] | None:
        from pytest_llmperf.workload.runner import run_warmup

        with open_files_for(config.concurrency):
            return run_warmup(endpoint.base_url, endpoint.model, prompts, config)


class RepetitionPolicy(Protocol):
    """How many runs are made of a (server, workload), on which servers, and when auto
    repetitions stop."""

    stop_on_change: bool  # from the second run on, auto repetitions stop on the change as read
    project_noise: bool  # only the measured side's spread falls with more runs (the other's is fixed)

    def effective(self, spec: ServerSpec) -> ServerSpec: ...

    def first(self, measurer: Measurer, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """The runs made up front of `spec` (as declared: the policy applies `effective`)."""
        ...

    def more(self, measurer: Measurer, measured: MeasuredRun, why: str) -> bool:
        """Auto repetitions' next run (or block) of `measured`; False when none could be made."""
        ...

    def stop_if_interrupted(self, measured: MeasuredRun) -> None:
        """KeyboardInterrupt where a run of `measured` (or of its twin) was interrupted."""
        ...


class Measurer:
    """The session's measured runs, each made once: its server started (one at a time,
    by the pool), warmed, and run the policy's number of times."""

    def __init__(
        self,
        options: LlmperfOptions,
        pool: ServerPool,
        published: Published,
        book: PromptBook,
        rootdir: Path,
        *,
        policy: RepetitionPolicy | None = None,
        runner: Runner | None = None,
        prompts: Sampler | None = None,
        server_down: Callable[[Endpoint], str | None] = why_down,
        clock: Callable[[], float] = time.perf_counter,
        log: Callable[[str], None] = lambda msg: None,
        detail: Callable[[str], None] | None = None,
    ) -> None:
        self.options = options
        self.pool = pool
        self.published = published  # a server's published figures at a concurrency, shown beside its runs
        self.book = book
        self.rootdir = rootdir
        self.policy: RepetitionPolicy = policy or Repetitions(options)
        self.runner: Runner = runner or HttpRunner(log)
        self.prompts: Sampler = prompts or book.requests_for
        self.server_down = server_down  # after failed requests: why the server is gone, or None
        self.clock = clock  # what added_seconds is measured with
        self.log = log
        self.detail = log if detail is None else detail  # what only -v shows: each run's own lines
        self.runs: dict[tuple[ServerSpec, Workload], MeasuredRun] = {}
        self.run_count = 0  # workloads actually executed (cache misses)
        self.added_seconds = 0.0  # wall time auto repetitions added (server starts and runs)
        self._warmed: Endpoint | None = None  # the started server the server-level warm-up ran on

    def is_cached(self, spec: ServerSpec, workload: Workload) -> bool:
        return (self.policy.effective(spec), workload) in self.runs

    def run(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """Measure `spec` under `workload`, once per session (later calls reuse it)."""
        key = (self.policy.effective(spec), workload)
        if key not in self.runs:
            measured = self.policy.first(self, spec, workload)
            self.run_count += 1
            self.runs[key] = measured
            self.policy.stop_if_interrupted(measured)
        return self.runs[key]

    def extend(
        self, measured: MeasuredRun, why: str = "inconclusive", *, stalled: bool = False, confirming: bool = False
    ) -> bool:
        """Auto repetitions: one more run (or block) of `measured`, `why` said in the log.
        False when the budget is spent or nothing more can be learnt. `stalled`: its one run
        completed nothing while its server lives (every request ran past the cap); one more
        run on a fresh start tells a start that came up too slow from a broken image.
        `confirming`: a run that reads a flagged cell again, beyond --llmperf-max-repetitions
        (the session's budget still holds)."""
        if stalled:
            allowed = self.can_retry(measured)
        else:
            allowed = self.can_extend(measured, beyond_max=confirming)
        if not allowed:
            return False
        started = self.clock()
        try:
            return self.policy.more(self, measured, why)
        finally:
            self.added_seconds += self.clock() - started

    def can_extend(self, measured: MeasuredRun, *, beyond_max: bool = False) -> bool:
        """Whether auto repetitions may add a run to `measured`: within --llmperf-max-repetitions
        (unless `beyond_max`) and the session's --llmperf-repetition-budget (a spent budget is
        noted on the run), and nothing broke or was interrupted."""
        if self.options.repetitions != "auto":
            return False
        if not beyond_max and len(measured.results) >= self.options.max_repetitions:
            return False
        if not finished_cleanly(measured):
            return False
        return self.budget_left(measured)

    def can_retry(self, measured: MeasuredRun) -> bool:
        """Whether auto repetitions may make a stalled run (one run, nothing completed, its
        server alive, not interrupted) again on a fresh start, within the session's budget."""
        if self.options.repetitions != "auto" or len(measured.results) != 1 or self.options.max_repetitions < 2:
            return False
        if measured.completed or measured.server_death or measured.results[0].partial:
            return False
        return self.budget_left(measured)

    def budget_left(self, measured: MeasuredRun) -> bool:
        """Whether the session's --llmperf-repetition-budget has time left (a spent one is noted on the run)."""
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

    # -- the steps a policy makes runs of -------------------------------------------

    def blank(self, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        """A run of `spec` with nothing measured yet."""
        return MeasuredRun(
            server=spec,
            workload=workload,
            results=[],
            samples={},
            provenance={},
            published=dict(self.published(spec.name, workload.concurrency)),
        )

    def start(self, measured: MeasuredRun, *, fresh: bool, announce: bool = True) -> Endpoint | None:
        """The server of `measured`, warmed on first use: started afresh for a `fresh` run
        (unless --llmperf-same-server or attached), the restart `announce`d; None when it died warming up."""
        spec = measured.server
        if fresh and not self.options.same_server and self.pool.target.starts_servers:
            if announce:
                self.log(f"restarting server {spec.name} for repetition {len(measured.results) + 1}")
            endpoint = self.pool.restart(spec)
        else:
            endpoint = self.pool.endpoint(spec)
        self.prompts(endpoint, measured.workload)  # sampled first: the provenance says what made them
        if not measured.provenance:
            measured.provenance.update(self.provenance(spec, endpoint, measured.workload))
        warm = self._warm_server(spec, endpoint, measured.workload)
        if not measured.results and measured.server_warmup is None:
            measured.server_warmup = warm
        failed = (warm or {}).get(FAILED)
        if failed:  # a server that died warming up is a dead server
            sent = (warm or {}).get("requests") or 0
            self._check_alive(measured, endpoint, during=f"during its warm-up ({failed:g} of {sent:g} failed)")
        return None if measured.server_death else endpoint

    def _warm_server(self, spec: ServerSpec, endpoint: Endpoint, workload: Workload) -> dict[str, float | None] | None:
        """--llmperf-server-warmup requests at once to a freshly started server (first run's
        max_tokens and endpoint, prompts beyond the measured ones), so compilation and caches are
        done before measuring. Its figures in real time; None when warm already or off."""
        if endpoint is self._warmed:
            return None
        self._warmed = endpoint
        count = self.options.server_warmup_for(spec.arg("--max-num-seqs"))
        if not count:
            return None
        from pytest_llmperf.workload.runner import warmup_prompts

        speed = clock_speed(endpoint)
        prompts = warmup_prompts(self.prompts(endpoint, workload), workload.num_prompts, count)
        config = dataclasses.replace(
            workload.run_config(clock_speed=speed, progress=False), concurrency=count, num_prompts=None
        )
        self.detail(f"{spec.name}: server warm-up, {plural(count, 'request')} at once (not measured)")
        figures = warmup_figures(self.runner.warmup(endpoint, prompts, config), speed)
        if figures:
            self.log(f"{spec.name}: server warm-up: {describe_warmup(figures)}")
        return figures

    def repeat(self, measured: MeasuredRun, endpoint: Endpoint) -> bool:
        """One more repetition of `measured`'s workload on `endpoint`, added to it in place;
        False when it broke (interrupted, nothing completed, its server died)."""
        rep = len(measured.results)
        where = (
            f"{measured.server.name} @ concurrency {measured.concurrency}"  # a base and an MTP server share the model
        )
        self.detail(f"{where}: {measured.workload.num_prompts} prompts")
        requests, speed = self.prompts(endpoint, measured.workload), clock_speed(endpoint)
        with endpoint.sample_peak_memory() as peak:  # empty where the target has no GPUs
            result = self.runner.measure(endpoint, requests, measured.workload, speed, where)
            behind = None if result.partial else host_behind([result])
            if behind:  # the host, not the server: once more, and judged on that one
                self.log(f"{where}: its host fell behind, the run is made again: {behind}")
                result = self.runner.measure(endpoint, requests, measured.workload, speed, where)
                measured.notes.append(f"repetition {rep + 1} was made twice: the first time {behind.split(':')[0]}")
        warmed = result.warmup_figures()
        if warmed:
            self.detail(f"{where}: warm-up {describe_warmup(warmed)}")
        measured.provenance.update(combine_peaks(measured.provenance, peak))  # the highest of the repetitions
        add_result(measured, result, speed)
        if not result.partial and failures(result.records).failed:
            self._check_alive(measured, endpoint)
        return finished_cleanly(measured)

    def _check_alive(self, measured: MeasuredRun, endpoint: Endpoint, during: str | None = None) -> None:
        """Requests failed: a dead server is named on the run with its last log lines and
        retired (its later tests fail at once). `during`: what ran, when not the run."""
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

    def provenance(self, spec: ServerSpec, endpoint: Endpoint, workload: Workload) -> dict[str, Any]:
        info = dict(endpoint.provenance)
        info.update(
            plugin_version=__version__,
            target=endpoint.target,
            server=spec.describe(),
            date=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            git_commit=self.git_commit,
        )
        info.update(self.book.provenance(endpoint.model, workload))
        return {k: v for k, v in info.items() if v is not None}

    @functools.cached_property
    def git_commit(self) -> str | None:
        return git_commit(self.rootdir)


class Repetitions:
    """Runs of one server judged against stored baselines, each after the first on a fresh
    start; under auto one (RECORD_REPETITIONS when recording), then more while a verdict asks."""

    # From the second run on, a change read near the tolerance stops auto repetitions.
    stop_on_change = True
    # The baseline's side is fixed: only the measured side's spread falls with runs.
    project_noise = True

    def __init__(self, options: LlmperfOptions) -> None:
        self.options = options

    def effective(self, spec: ServerSpec) -> ServerSpec:
        return spec.with_image(self.options.image) if self.options.image else spec

    @property
    def planned(self) -> int:
        reps = self.options.repetitions
        if reps == "auto":
            return min(RECORD_REPETITIONS, self.options.max_repetitions) if self.options.update_baselines else 1
        return int(reps)

    def first(self, measurer: Measurer, spec: ServerSpec, workload: Workload) -> MeasuredRun:
        measured = measurer.blank(self.effective(spec), workload)
        for rep in range(self.planned):
            endpoint = measurer.start(measured, fresh=rep > 0)  # the first on the server running, if any
            if endpoint is None or not measurer.repeat(measured, endpoint):
                break  # nothing more to learn
        return measured

    def stop_if_interrupted(self, measured: MeasuredRun) -> None:
        stop_if_interrupted(measured)

    def more(self, measurer: Measurer, measured: MeasuredRun, why: str) -> bool:
        count = len(measured.results) + 1
        bound = f" of at most {self.options.max_repetitions}" if count <= self.options.max_repetitions else ""
        measurer.log(f"{measured.server.name} @ concurrency {measured.concurrency}: {why}, repetition {count}{bound}")
        endpoint = measurer.start(measured, fresh=True)
        if endpoint is None:  # died during the fresh start's warm-up
            return False
        measurer.repeat(measured, endpoint)
        stop_if_interrupted(measured)
        return True


def add_result(measured: MeasuredRun, result: RunResult, speed: float) -> None:
    """`result` as `measured`'s next repetition: its figures, notes, and (the first's) request rows."""
    rep = len(measured.results)
    measured.results.append(result)
    summary = result.summary()
    # A base server's "not speculative" is no news: only expected acceptance is reported missing.
    expected = measured.server.is_speculative or summary.spec_status not in (None, NOT_SPECULATIVE)
    notes = [*summary.notes, *([summary.spec_note] if summary.spec_note and expected else [])]
    measured.spec_note = summary.spec_note
    measured.notes += [note for note in notes if note not in measured.notes]
    flat = flatten(summary.to_dict())
    for name in set(flat) | set(measured.samples):
        measured.samples.setdefault(name, [None] * rep).append(flat.get(name))
    if rep == 0:
        measured.rows[:] = request_rows(result.records, clock_speed=speed)


def finished_cleanly(measured: MeasuredRun) -> bool:
    """Whether another run could teach anything: none was interrupted or completed nothing,
    and the server lives."""
    return not (any(r.partial or not r.completed for r in measured.results) or measured.server_death)


def stop_if_interrupted(measured: MeasuredRun) -> None:
    """The runner turned Ctrl-C into a partial result: keep it for the report, then stop
    the session as pytest does on Ctrl-C instead of moving to the next test."""
    if any(result.partial for result in measured.results):
        by = " by SIGTERM" if TERMINATE.received else ""
        raise KeyboardInterrupt(f"interrupted{by} during {measured.server.name} @ concurrency {measured.concurrency}")


def clock_speed(endpoint: Endpoint) -> float:
    return float(endpoint.provenance.get("clock_speed", 1.0))


def git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
