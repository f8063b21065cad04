"""What a performance test receives: the `llmperf` fixture's object (`llmperf.run(...)`),
and pytest-benchmark's timing of a run when the user asked for its output."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_llmperf.collecting.selection import resolve_server
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.workload import WORKLOAD_KEYS, Workload, resolve_workload

if TYPE_CHECKING:
    from pytest_llmperf.judging.capacity_run import CapacityResult
    from pytest_llmperf.judging.session import PerfSession
    from pytest_llmperf.measuring.measured import MeasuredRun

# Per test: the runs its llmperf fixture handed out (for its JUnit properties).
USED_RUNS_KEY = pytest.StashKey["list[MeasuredRun]"]()
# pytest-benchmark's options that ask for its output: a run is timed into it only then.
BENCHMARK_ASKED = ("benchmark_json", "benchmark_save", "benchmark_autosave", "benchmark_compare", "benchmark_enable")


class LlmperfFixture:
    """What a performance test receives: `llmperf.run(concurrency=...)`."""

    def __init__(
        self,
        perf: PerfSession,
        kwargs: dict[str, Any],
        nodeid: str,
        profile: str,
        benchmark: Callable[[], Any] | None = None,
        used: list[MeasuredRun] | None = None,
        declared: Callable[[object], Mapping[str, ServerSpec]] = lambda name: {},
    ) -> None:
        self._perf = perf
        self._declared = declared  # the servers declared for this test, where a name is given
        self._used = used if used is not None else []  # the runs this test got, for its JUnit properties
        self._kwargs = kwargs
        self._nodeid = nodeid
        self._profile = profile
        self._warmup = perf.options.warmup  # --llmperf-warmup: where the marker gives none
        self._slos = perf.options.slos  # --llmperf-slos: where the marker gives none
        self._benchmark = benchmark  # pytest-benchmark's fixture, fetched only when used
        self.server: ServerSpec | None = kwargs.get("server")
        self.base: ServerSpec | None = kwargs.get("base")

    @property
    def profile(self) -> str:
        """The session's workload profile (`--llmperf-profile`): smoke, nightly or full."""
        return self._profile

    def run(self, concurrency: int, server: ServerSpec | str | None = None, **workload: Any) -> MeasuredRun:
        """A bad argument fails the test in one line that says which and how to fix it,
        before any server starts; `server`: a ServerSpec or a declared server's name."""
        try:
            spec = resolve_server("server", server, self._declared(server)) if server is not None else self.server
        except ValueError as exc:
            self._refuse(f"llmperf.run(): {str(exc).removeprefix('llmperf ')}")
        if spec is None:
            self._refuse("llmperf.run() needs server= (or @pytest.mark.llmperf(server=...))")
        declared = {k: v for k, v in self._kwargs.items() if k in WORKLOAD_KEYS}
        declared.update(workload)
        try:
            options = self._perf.options
            resolved = resolve_workload(
                declared,
                concurrency,
                self._profile,
                self._warmup,
                self._slos,
                dataset=(options.dataset_name, options.dataset),
                where="llmperf.run()",  # the marker's own values were checked at collection
            )
        except ValueError as exc:
            self._refuse(str(exc))
        from pytest_llmperf.baselines.outcome import SetupError

        try:
            if self._benchmark is not None and not self._perf.is_cached(spec, resolved):
                measured = run_under_benchmark(self._benchmark(), self._perf.run, spec, resolved)
                self._benchmark = None  # pytest-benchmark times one call per test
            else:
                measured = self._perf.run(spec, resolved)
        except SetupError as exc:  # what only a running server could tell (its token counts)
            self._refuse(str(exc))
        self._used.append(measured)
        return self._perf.bind(measured, self._nodeid, self._kwargs.get("tolerances"), self._kwargs.get("error_budget"))

    def capacity(
        self,
        slos: Mapping[str, float],
        *,
        over: str = "concurrency",
        within: tuple[int, int] = (1, 64),
        resolution: float | str = 1,
        confidence: float | None = None,
        runs_per_probe: int = 5,
        confirm_runs: int = 2,
        max_runs: int = 40,
        server: ServerSpec | str | None = None,
        **workload: Any,
    ) -> CapacityResult:
        """The largest concurrency within `within` whose runs of the test's workload meet every
        SLO (`{"ttft_ms_p99": 2000, "tpot_ms_p99": 80}`) in the share asked, with its interval
        (docs/capacity.md); `.assert_no_regression()` judges it against its baseline."""
        from pytest_llmperf.capacity.slo import SLOSet
        from pytest_llmperf.judging.capacity_run import capacity_test

        where = "llmperf.capacity()"
        if over != "concurrency":
            self._refuse(
                f"{where}: over={over!r}: a test's workload sends a closed loop of streams, so its capacity is "
                "searched over='concurrency' (users)"
            )
        if self._perf.paired is not None:  # a suite mixing capacity and fixed cells runs paired as well
            pytest.skip(f"{where}: a capacity is judged against stored baselines; a paired session does not search one")
        try:
            spec = resolve_server("server", server, self._declared(server)) if server is not None else self.server
        except ValueError as exc:
            self._refuse(f"{where}: {str(exc).removeprefix('llmperf ')}")
        if spec is None:
            self._refuse(f"{where} needs server= (or @pytest.mark.llmperf(server=...))")
        declared = {k: v for k, v in self._kwargs.items() if k in WORKLOAD_KEYS}
        declared.update(workload)
        options = self._perf.options
        try:
            declared["slos"] = SLOSet.parse(slos).goodput_text  # each probe's goodput at the SLOs searched
            found = capacity_test(
                self._perf,
                spec,
                self._workload_at(declared, where),
                slos,
                nodeid=self._nodeid,
                within=within,
                resolution=resolution,
                confidence=options.confidence if confidence is None else confidence,
                budget={
                    "runs_per_probe": runs_per_probe,
                    "confirm_runs": confirm_runs,
                    "max_runs": max_runs,
                    "max_seconds": options.repetition_budget,
                },
                tolerances=self._kwargs.get("tolerances"),
                error_budget=self._kwargs.get("error_budget"),
            )
        except (ValueError, TypeError) as exc:
            self._refuse(f"{where}: {exc}")
        self._used.append(found.run)
        return found

    def _workload_at(self, declared: dict[str, Any], where: str) -> Callable[[int], Workload]:
        """The test's workload at a concurrency, as a capacity probe runs it."""
        options = self._perf.options
        dataset = (options.dataset_name, options.dataset)
        return lambda concurrency: resolve_workload(
            declared, concurrency, self._profile, self._warmup, self._slos, dataset=dataset, where=where
        )

    def _refuse(self, message: str) -> NoReturn:
        pytest.fail(f"{self._nodeid}: {message}", pytrace=False)


def run_under_benchmark(benchmark: Any, run: Callable[..., Any], spec: ServerSpec, workload: Any) -> Any:
    """Time the run as one pytest-benchmark round and put its figures in extra_info."""
    measured = benchmark.pedantic(run, args=(spec, workload), rounds=1, iterations=1)
    benchmark.extra_info.update(
        llmperf_server=spec.name,
        llmperf_concurrency=workload.concurrency,
        llmperf_workload=workload.to_dict(),
        llmperf_metrics={k: v for k, v in measured.figures.items() if v is not None},
        llmperf_vllm_version=measured.provenance.get("vllm_version"),
    )
    return measured


def benchmark_factory(request: pytest.FixtureRequest) -> Callable[[], Any] | None:
    """pytest-benchmark's fixture, without requiring that plugin, when the user asked for
    its output (--benchmark-json, --benchmark-save, --benchmark-autosave,
    --benchmark-compare, or --benchmark-enable). Installed is not asking: a one-round
    timing of a whole run adds nothing to the plugin's own figures but a 200-column table."""
    config = request.config
    if not config.pluginmanager.hasplugin("benchmark"):
        return None
    if not any(config.getoption(name, None) for name in BENCHMARK_ASKED):
        return None
    disabled = config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False)
    if config.getoption("benchmark_skip", False) or disabled:
        return None
    return lambda: request.getfixturevalue("benchmark")


def benchmark_machine_info(options: Any, perf: PerfSession | None) -> dict[str, Any]:
    """What pytest-benchmark's machine info gains: the target and the GPUs the runs saw."""
    info: dict[str, Any] = {"llmperf_target": options.target}
    if perf is not None:
        gpu = {k: v for run in perf.runs.values() for k, v in run.provenance.items() if k.startswith("gpu_")}
        info.update({f"llmperf_{k}": v for k, v in gpu.items()})
    return info
