"""Whole nights of the seed suite through the session's own gate, on the virtual clock.

    python benchmarks/nights.py --nights 20
    python benchmarks/nights.py --nights 20 --double      # every noise figure doubled
    python benchmarks/nights.py --nights 20 --confirm 1   # every regression fails at once
    python benchmarks/nights.py --nights 20 --recordings 20  # 20 baselines, each with its nights
    python benchmarks/nights.py --nights 20 --paired      # paired A/B nights (benchmarks/paired_nights.py)

The seed suite (tests/perf/test_seed_suite.py, its servers from the root conftest.py) at
the `nightly` profile: its test functions are called as pytest calls them, with the
plugin's own `llmperf` fixture object (plugin.LlmperfFixture) over a real PerfSession
whose target and runner are benchmarks/nightsim.py's (virtual servers, the simulator's
engine on its virtual clock), in the order the plugin runs them (ordering.order_items).
Nothing of the session is re-implemented here: what runs, what is added by auto
repetitions, how the noise is assembled and how each metric is judged is the session's.

First one recording session (`--update-baselines`, the recording night's noise) into a
temporary rootdir; then every night is a fresh PerfSession judged against that one
baseline, kept for all nights, reading and appending a history file as the plugin does:
--llmperf-confirm (`--confirm`; the plugin's default at this profile is 2) sees the night
before, and each cell's spread between sessions comes from the last nights' values. The
unchanged nights are one series; each change's episode (up to three nights, until one is
red) starts from the history of a window of those unchanged nights, as a change arrives
after weeks of unchanged nights.
A test's outcome is what pytest would make of it: PerfFailure (or pytest.fail) fails it,
InconclusiveWarning and SuspectWarning warn.

`--recordings N` does all of that N times, independently: N baselines, each recorded on
its own recording night (recording 0 draws with `--seed`, recording r > 0 with the seed
"<seed>.<r>"), each followed by its own unchanged nights and episodes, so that no figure
rests on the luck of one recording night. With N > 1 each rate is printed as the mean over
recordings with its spread across them (benchmarks/recordings.py); N = 1 prints one
recording's tables.

Noise (benchmarks/noise_params.json, each figure with its source): a spread between
server starts per concurrency, a shift of the whole box per night, Student-t tails, an
occasional slow start, and nights noisier than the recording night.

Prints: the share of unchanged nights that are red (some test fails) and that carry a
suspect cell, the failing cells per red night, each cell's false-red rate; for each
change (one server's decode 5 % slower, a 0.03 acceptance drop, a 5 % and a 10 % speedup
drop, a whole image 5 % slower) how often a cell it touches is flagged (red or suspect) on
the first night (split by whether that night was a noisy one), red on the first night, red
within two and within three; and the simulated GPU-minutes a night against the seeds'
fixed runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import multiprocessing
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import pytest  # noqa: E402
from nightsim import Draw, StartNoise, VirtualRunner, VirtualTarget  # noqa: E402
from recordings import (  # noqa: E402
    CHANGE_FIGURES,
    aggregate,
    change_rates,
    print_spreads,
    recording_rates,
    share,
    suspect,
)

from pytest_llmperf.baselines.judgement import GateRecord  # noqa: E402
from pytest_llmperf.baselines.outcome import InconclusiveWarning, PerfFailure, SuspectWarning  # noqa: E402
from pytest_llmperf.collecting.ordering import order_items  # noqa: E402
from pytest_llmperf.collecting.selection import declared_servers, resolve_server  # noqa: E402
from pytest_llmperf.judging.more_runs import MoreRuns  # noqa: E402
from pytest_llmperf.judging.session import PerfSession  # noqa: E402
from pytest_llmperf.metrics.registry import CAPACITY  # noqa: E402
from pytest_llmperf.options import BASELINE_NIGHTS, LlmperfOptions, resolve_options  # noqa: E402
from pytest_llmperf.plugin import LlmperfFixture  # noqa: E402
from pytest_llmperf.servers.endpoint import Endpoint  # noqa: E402
from pytest_llmperf.servers.spec import ServerSpec  # noqa: E402
from pytest_llmperf.sim import tokenizer  # noqa: E402
from pytest_llmperf.stats.spread import NIGHTS_WINDOW  # noqa: E402
from pytest_llmperf.workload.prompts import load_dataset, sample_prompts  # noqa: E402
from pytest_llmperf.workload.requests import SampledRequest  # noqa: E402
from pytest_llmperf.workload.workload import Workload  # noqa: E402

SUITE = ROOT / "tests" / "perf" / "test_seed_suite.py"
PARAMS = ROOT / "benchmarks" / "noise_params.json"
# The seeds' fixed runs on their hardware, seconds per server (300 s caps at 1 and 8,
# 627 s for 1000 prompts at 32), for the suite's four servers.
SEED_FIXED_S = {1: 300.0, 8: 300.0, 32: 627.0}
PROFILE = "nightly"
CAPACITY_TEST = "test_capacity"  # the suite's capacity searches, judged with --capacity
CAPACITY_PROFILE = "full"  # the seed suite searches capacity in the full profile only (docs/capacity.md)


# -- the suite, as pytest collects it ---------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """One collected test of the seed suite: its node id, function, call arguments and
    marker kwargs (server= and base= as the declared ServerSpecs)."""

    nodeid: str
    function: Callable[..., None]
    params: Mapping[str, Any]
    marker: Mapping[str, Any]

    @property
    def servers(self) -> list[ServerSpec]:
        return [s for s in (self.marker.get("server"), self.marker.get("base")) if s is not None]


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed_items(suite: Path = SUITE, conftest: Path = ROOT / "conftest.py", capacity: bool = False) -> list[Item]:
    """The suite's tests as pytest collects them (functions in file order, each one's
    parametrize marks in the order pytest applies them, ids joined as pytest joins them,
    the llmperf marks of each parameter merged), in the order the plugin runs them: its
    fixed-concurrency tests, or (`capacity`) its capacity tests alone."""
    declared = declared_servers([load_module(conftest, "_seed_conftest").pytest_llmperf_servers()])
    module = load_module(suite, "_seed_suite")
    items = []
    for name, function in vars(module).items():
        if not name.startswith("test_") or not callable(function) or (name == CAPACITY_TEST) != capacity:
            continue
        grids = []
        for mark in getattr(function, "pytestmark", []):  # the decorator nearest the function first
            if mark.name != "parametrize":
                continue
            choices = []
            for value in mark.args[1]:
                param = value if hasattr(value, "marks") else pytest.param(value)
                (arg,) = param.values
                marker = {k: v for m in param.marks if m.name == "llmperf" for k, v in m.kwargs.items()}
                choices.append((param.id or str(arg), {mark.args[0]: arg}, marker))
            grids.append(choices)
        for combination in itertools.product(*grids):
            ident = "-".join(c[0] for c in combination)
            params = {k: v for c in combination for k, v in c[1].items()}
            marker = {k: v for c in combination for k, v in c[2].items()}
            for key in ("server", "base"):
                if key in marker:
                    marker[key] = resolve_server(key, marker[key], declared)
            nodeid = f"{suite.relative_to(ROOT).as_posix()}::{name}" + (f"[{ident}]" if ident else "")
            items.append(Item(nodeid, function, params, marker))
    return order_items(items, lambda item: item.marker)


# -- the noise ------------------------------------------------------------------------------------


def t_draw(rng: random.Random, dof: float) -> float:
    """Student's t with `dof` degrees of freedom, scaled to unit variance (dof > 2)."""
    chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(int(dof)))
    return rng.gauss(0.0, 1.0) / math.sqrt(chi2 / dof) / math.sqrt(dof / (dof - 2))


@dataclass(frozen=True)
class NoiseModel:
    """noise_params.json's figures (doubled where `double`)."""

    step: Mapping[int, float]
    step_by_server: Mapping[str, Mapping[int, float]]
    acceptance: float
    dof: float
    slow_share: float
    slow_excess: float
    shift: float
    noisy_share: float
    noisy_multiplier: float
    start_s: float

    @classmethod
    def load(cls, path: Path = PARAMS, double: bool = False) -> NoiseModel:
        raw = json.loads(path.read_text())

        def fig(entry: Mapping[str, Any]) -> float:
            return float(entry["value"]) * (2.0 if double and entry.get("doubles") else 1.0)

        spread = raw["start_step_spread"]
        overrides = spread["server_overrides"]["value"]
        multiplier = raw["noisy_night"]["multiplier"]
        noisy = float(multiplier["value"])
        return cls(
            step={int(c): fig(e) for c, e in spread["by_concurrency"].items()},
            step_by_server={
                s: {int(c): v * (2.0 if double else 1.0) for c, v in m.items()} for s, m in overrides.items()
            },
            acceptance=fig(raw["start_acceptance_spread"]),
            dof=fig(raw["tails"]["dof"]),
            slow_share=min(1.0, fig(raw["slow_start"]["share"])),
            slow_excess=fig(raw["slow_start"]["excess"]),
            shift=fig(raw["night_shift"]),
            noisy_share=min(1.0, fig(raw["noisy_night"]["share"])),
            noisy_multiplier=1.0 + (noisy - 1.0) * (2.0 if double and multiplier.get("doubles") else 1.0),
            start_s=fig(raw["server_start_s"]),
        )

    def night(self, seed: int | str, night: str, recording: bool = False) -> NightNoise:
        rng = random.Random(f"{seed}:night:{night}")
        shift = math.exp(self.shift * t_draw(rng, self.dof))
        noisy = rng.random() < self.noisy_share and not recording
        return NightNoise(f"{seed}:{night}", shift, self.noisy_multiplier if noisy else 1.0)

    def draw(
        self, night: NightNoise, changes: Mapping[str, Change] | None = None
    ) -> Callable[[ServerSpec, int], StartNoise]:
        """The target's draw for each server start of `night`, with `changes` by server name."""

        def start(spec: ServerSpec, count: int) -> StartNoise:
            rng = random.Random(f"{night.key}:{spec.name}:{count}")
            slow = 1.0 + self.slow_excess if rng.random() < self.slow_share else 1.0
            spreads = {**self.step, **self.step_by_server.get(spec.name, {})}
            step = {
                c: night.shift * slow * math.exp(s * night.scale * t_draw(rng, self.dof))
                for c, s in sorted(spreads.items())
            }
            acceptance = 1.0
            if spec.is_speculative:
                acceptance = max(0.0, 1.0 + self.acceptance * night.scale * t_draw(rng, self.dof))
            change = (changes or {}).get(spec.name)
            if change is None:
                return StartNoise(step, acceptance)
            changed = {c: f * change.step for c, f in step.items()}
            return StartNoise(changed, acceptance * change.acceptance, change.sim_args)

        return start


@dataclass(frozen=True)
class NightNoise:
    key: str
    shift: float  # the box's factor on every step cost tonight
    scale: float  # tonight's spread against the table's (1: as quiet as the recording night)


@dataclass(frozen=True)
class Change:
    """What a new image changed on one server: its step costs times `step`, its acceptance
    rates times `acceptance`, and simulator flags it adds (`--sim-prefill-time-scale 1.1`)."""

    step: float = 1.0
    acceptance: float = 1.0
    sim_args: tuple[str, ...] = ()


# -- a design to compare ------------------------------------------------------------------

TWO_STAGE_RUNS = 3


class TwoStage:
    """A fixed two-stage design in place of the session's adaptive auto repetitions (the
    gate's Repeater seam): one run; if any gated metric of the test does not pass, two more
    on fresh starts, and the rule judges once over the three. The first stage only passes
    (at the pass confidence), so a regression is claimed once, at the alarm confidence."""

    def __init__(self, measurer: Any) -> None:
        self.measurer = measurer

    def worth_another(self, run: Any, verdicts: list[Any], read_before: Collection[str] = ()) -> str | None:
        runs = len(run.results)
        if runs >= TWO_STAGE_RUNS or (runs == 1 and all(v.ok for v in verdicts)):
            return None
        return "two-stage: the second stage"

    def extend(
        self, measured: Any, why: str = "inconclusive", *, stalled: bool = False, confirming: bool = False
    ) -> bool:
        return bool(self.measurer.extend(measured, why, stalled=stalled, confirming=confirming))


# -- one session ---------------------------------------------------------------------------------


class SeedPrompts:
    """The session's Sampler: the workload's ShareGPT prompts as the plugin samples them
    (workload/prompts.sample_prompts, seed and count from the workload), counted as the
    simulated server's /tokenize counts them; sampled once per process, shared by nights."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self.cache: dict[tuple[Any, ...], list[SampledRequest]] = {}

    def __call__(self, endpoint: Endpoint, workload: Workload) -> list[SampledRequest]:
        key = (endpoint.model, workload.seed, workload.prompts_needed)
        if key not in self.cache:
            self.cache[key] = sample_prompts(workload, self.dataset, count_tokens)
        return self.cache[key]


def count_tokens(texts: list[str]) -> list[int]:
    return [len(tokenizer.encode(t)) for t in texts]


def night_options(
    update: bool = False,
    history: Path | None = None,
    confirm: int | None = None,
    flags: Mapping[str, Any] | None = None,
    ini: Mapping[str, Any] | None = None,
) -> LlmperfOptions:
    """The session's options: the simulator, the nightly profile, the history at `history`
    (None: off) and --llmperf-confirm `confirm` (None: the plugin's default); `flags`: more
    command-line values by option dest (e.g. {"llmperf_sim_args": "--sim-step-time-scale 1.05"}),
    `ini`: ini values by name (e.g. {"llmperf_tolerances": ["steady_decode_tok_s = 3%"]})."""
    values = {
        "llmperf_sim": True,
        "llmperf_profile": PROFILE,
        "llmperf_history": "off" if history is None else str(history),
        "llmperf_update_baselines": update,
        "llmperf_confirm": None if confirm is None else str(confirm),
        **(flags or {}),
    }
    return resolve_options(lambda dest: values.get(dest), lambda name: (ini or {}).get(name, ""))


@dataclass
class Night:
    """One session's outcomes: each test's (passed, failed, warned), the gate's records,
    and the simulated GPU seconds of its runs and server starts."""

    outcomes: dict[str, str]
    gates: list[GateRecord]
    run_s: float
    starts: int
    errors: dict[str, str] = field(default_factory=dict)
    capacities: list[dict[str, Any]] = field(default_factory=list)  # the report document's, one per capacity test

    def failing(self) -> list[tuple[str, str, int, str, str]]:
        """(test function, server, concurrency, metric, status) of each gated metric that fails."""
        return [cell for cell in self.flagged() if cell[4] != "suspect"]

    def flagged(self) -> list[tuple[str, str, int, str, str]]:
        """The same for each gated metric that fails or is suspect."""
        return [
            (g.nodeid.split("::")[1].split("[")[0], g.server, g.concurrency, v.metric, v.status)
            for g in self.gates
            for v in g.verdicts
            if not v.ok and v.status != "inconclusive"
        ]


def verdict_rows(gates: Iterable[GateRecord]) -> list[list[Any]]:
    """Each gated metric's verdict: [node id, server, concurrency, metric, status, measured,
    baseline, noise], in the order judged (what two ways of judging a night are compared on)."""
    return [
        [
            g.nodeid,
            g.server,
            g.concurrency,
            v.metric,
            getattr(v.status, "value", v.status),
            v.measured,
            v.baseline,
            v.noise,
        ]
        for g in gates
        for v in g.verdicts
    ]


def run_session(
    rootdir: Path,
    items: Sequence[Item],
    target: Any,
    runner: Any,
    prompts: Callable[[Endpoint, Workload], list[SampledRequest]],
    datasets: Mapping[tuple[str, str | None], Any] | None,
    *,
    update: bool = False,
    start_s: float = 0.0,
    history: Path | None = None,
    confirm: int | None = None,
    design: str = "adaptive",
    log: Callable[[str], None] = lambda message: None,
    options: LlmperfOptions | None = None,
) -> Night:
    """One pytest session of `items` against `target` through `runner`: the seed tests
    called with the plugin's fixture object over a PerfSession, caught as pytest would.
    `start_s`: the GPU seconds a server start costs (the session's clock counts them);
    `history`: the history file the session reads and appends to (None: none kept);
    `design`: the session's auto repetitions ("adaptive") or TwoStage's; `options`: the
    session's options as resolved (night_options), in place of `update`, `history` and
    `confirm`'s."""
    if options is None:
        options = night_options(update, history, confirm)
    ran = runner.gpu_seconds

    def clock() -> float:  # the session's clock for auto repetitions' budget: simulated GPU time
        return runner.gpu_seconds + start_s * sum(target.starts.values())

    perf = PerfSession(
        options,
        target,
        rootdir,
        datasets=datasets,
        runner=runner,
        prompts=prompts,
        server_down=lambda endpoint: None,
        clock=clock,
        log=log,
        repeater=TwoStage if design == "two-stage" else MoreRuns,
    )
    starts = sum(target.starts.values())
    outcomes: dict[str, str] = {}
    errors: dict[str, str] = {}
    try:
        for item in items:
            fixture = LlmperfFixture(perf, dict(item.marker), item.nodeid, options.profile)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", UserWarning)
                try:
                    item.function(fixture, **item.params)
                except (PerfFailure, pytest.fail.Exception) as exc:
                    outcomes[item.nodeid] = "failed"
                    errors[item.nodeid] = str(exc)
                    continue
            warned = any(issubclass(w.category, (InconclusiveWarning, SuspectWarning)) for w in caught)
            outcomes[item.nodeid] = "warned" if warned else "passed"
        end = perf.finish()  # the baselines recorded, the history lines appended
        errors.update({f"finish {i}": line for i, line in enumerate(end.lines) if line.startswith("NOT")})
    finally:
        perf.close()
    return Night(
        outcomes, perf.gates, runner.gpu_seconds - ran, sum(target.starts.values()) - starts, errors, perf.capacities
    )


def night(
    rootdir: Path,
    items: Sequence[Item],
    model: NoiseModel,
    noise: NightNoise,
    prompts: Callable[[Endpoint, Workload], list[SampledRequest]],
    datasets: Mapping[tuple[str, str | None], Any] | None,
    *,
    changes: Mapping[str, Change] | None = None,
    update: bool = False,
    history: Path | None = None,
    confirm: int | None = None,
    design: str = "adaptive",
    profile: str = PROFILE,
    options: LlmperfOptions | None = None,
    draw: Callable[[NoiseModel, NightNoise, Mapping[str, Change] | None], Draw] | None = None,
) -> Night:
    """One night: a fresh session of `items` on virtual servers drawing `noise` (with
    `changes`; `draw`: how a start draws it, the model's own by default), judged against (or,
    `update`, recording) the baselines under `rootdir`, reading and appending `history`
    (None: none kept) under --llmperf-confirm `confirm`, at workload profile `profile`;
    `options`: the session's options in place of those."""
    target = VirtualTarget((draw or NoiseModel.draw)(model, noise, changes))
    return run_session(
        rootdir,
        items,
        target,
        VirtualRunner(),
        prompts,
        datasets,
        start_s=model.start_s,
        design=design,
        options=options or night_options(update, history, confirm, flags={"llmperf_profile": profile}),
    )


class HistoryWindow:
    """The history file a series of nights reads and appends to, cut to the last `keep`
    sessions' lines (all the session reads: the nightly spread's window and the nights
    --llmperf-confirm looks back on); a file of a thousand nights would be read each night."""

    def __init__(self, path: Path, keep: int = NIGHTS_WINDOW, prior: Sequence[bytes] = ()) -> None:
        self.path = path
        self.keep = keep
        self.sessions: list[bytes] = list(prior)[-keep:]
        path.write_bytes(b"".join(self.sessions))

    def after_session(self) -> bytes:
        """Take in the lines the last session appended (returned) and cut the file to the window."""
        size = sum(len(chunk) for chunk in self.sessions)
        appended = self.path.read_bytes()[size:] if self.path.exists() else b""
        self.sessions = [*self.sessions, appended][-self.keep :]
        self.path.write_bytes(b"".join(self.sessions))
        return appended

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


# -- the changes a night must catch ---------------------------------------------------------------

DECODE_SERVER = "qwen3.6-27b-fp8"
MTP_SERVER = "qwen3.6-27b-fp8-mtp"


@dataclass(frozen=True)
class Scenario:
    name: str
    changes: Callable[[Sequence[ServerSpec]], dict[str, Change]]
    flags: Callable[[str, str, str], bool]  # (server, metric, test function) -> the change is caught by it
    models: Callable[[Sequence[ServerSpec]], set[str]]  # the models whose tests it touches


def acceptance_drop(spec: ServerSpec, drop: float) -> Change:
    """Acceptance rate `drop` lower: the per-position rates scaled by 1 - drop / rate (the
    rate is their mean, on the simulator)."""
    from pytest_llmperf.sim.acceptance import extend_rates
    from pytest_llmperf.sim.config import SimConfig

    config = SimConfig.from_vllm_argv(spec.vllm_args(host="127.0.0.1", port=0))  # as the target runs it
    rate = statistics.mean(extend_rates(config.resolved_profile.acceptance, config.num_speculative_tokens))
    return Change(acceptance=1.0 - drop / rate)


def speedup_loss(loss: float, model: str) -> Scenario:
    """The MTP server's speedup `loss` lower: its step costs times 1 / (1 - loss), its base's
    unchanged; caught by the speedup cells alone."""
    return Scenario(
        f"{MTP_SERVER} speedup {loss:.0%} lower",
        lambda specs: {MTP_SERVER: Change(step=1 / (1 - loss))},
        lambda server, metric, test: server == MTP_SERVER and metric == "mtp_speedup",
        lambda specs: {model},
    )


# Capacity's changes: a base server's prefill this much slower, which moves its TTFT knee and
# so its capacity at the seed suite's SLOs, decode at low load unchanged. The benchmark prints
# the capacity each change leaves on the recording night's noise: a search finds whole users,
# so a loss is the step it lands on.
CAPACITY_CHANGES = (("qwen3.6-35b-a3b-fp8", 1.2), ("qwen3.6-27b-fp8", 1.2))


def prefill_slower(server: str, scale: float) -> Scenario:
    """`server`'s prefill `scale` times slower (the simulator's --sim-prefill-time-scale); caught by its capacity."""
    return Scenario(
        f"{server} prefill {scale - 1:.0%} slower",
        lambda specs: {server: Change(sim_args=("--sim-prefill-time-scale", f"{scale:g}"))},
        lambda name, metric, test: name == server,
        lambda specs: {s.model for s in specs if s.name == server},
    )


def scenarios(servers: Sequence[ServerSpec], capacity: bool = False) -> list[Scenario]:
    by_name = {s.name: s for s in servers}
    model_of = {s.name: s.model for s in servers}
    if capacity:
        return [
            *(prefill_slower(server, scale) for server, scale in CAPACITY_CHANGES),
            Scenario(
                "whole image 5% slower",
                lambda specs: {s.name: Change(step=1 / 0.95) for s in specs},
                lambda server, metric, test: True,
                lambda specs: {s.model for s in specs},
            ),
        ]
    return [
        Scenario(
            f"{DECODE_SERVER} decode 5% slower",
            lambda specs: {DECODE_SERVER: Change(step=1 / 0.95)},
            lambda server, metric, test: server == DECODE_SERVER,
            lambda specs: {model_of[DECODE_SERVER]},
        ),
        Scenario(
            f"{MTP_SERVER} acceptance -0.03",
            lambda specs: {MTP_SERVER: acceptance_drop(by_name[MTP_SERVER], 0.03)},
            lambda server, metric, test: server == MTP_SERVER and metric.startswith("acceptance"),
            lambda specs: {model_of[MTP_SERVER]},
        ),
        speedup_loss(0.05, model_of[MTP_SERVER]),
        speedup_loss(0.10, model_of[MTP_SERVER]),
        Scenario(
            "whole image 5% slower",
            lambda specs: {s.name: Change(step=1 / 0.95) for s in specs},
            lambda server, metric, test: True,
            lambda specs: {s.model for s in specs},
        ),
    ]


# -- the benchmark ---------------------------------------------------------------------------------


def all_servers(items: Iterable[Item]) -> list[ServerSpec]:
    seen: dict[str, ServerSpec] = {}
    for item in items:
        for spec in item.servers:
            seen.setdefault(spec.name, spec)
    return list(seen.values())


def gpu_s(result: Night, start_s: float, servers: int) -> float:
    """A night's GPU seconds: its runs, and a server start for each start beyond one per server."""
    return result.run_s + max(0, result.starts - servers) * start_s


@dataclass(frozen=True)
class NightSummary:
    """What the tables need of one judged night (picklable, from a worker process)."""

    index: int
    red: bool
    failing: list[tuple[str, str, int, str, str]]
    flagged: list[tuple[str, str, int, str, str]]
    cells: list[tuple[str, str, int, str, str]]  # (test, server, concurrency, metric, status) of every verdict
    gpu_s: float
    starts: int
    lines: bytes = b""  # the history lines the night appended
    capacities: tuple[tuple[str, float | None, float], ...] = ()  # (server, capacity, GPU s) of each search


@dataclass(frozen=True)
class Recorded:
    """What the tables need of a recording session (picklable, from a worker process)."""

    assertions: int
    starts: int
    run_s: float
    failed: str = ""  # why the recording did not pass ("": it passed)
    capacities: tuple[tuple[str, float | None, str], ...] = ()  # (server, capacity, the search's line) of each


EPISODE_NIGHTS = 3  # a change's nights, until one is red


@dataclass
class Bench:
    """Everything a night needs, set up once in the parent (worker processes fork from it)."""

    rootdir: Path
    items: list[Item]
    servers: list[ServerSpec]
    model: NoiseModel
    prompts: SeedPrompts
    datasets: dict[tuple[str, str | None], Any]
    seed: int | str
    confirm: int | None
    design: str = "adaptive"
    capacity: bool = False  # the items are the suite's capacity tests, the changes capacity's
    record_nights: int = BASELINE_NIGHTS  # the recording nights each baseline entry's level is the median of

    @property
    def profile(self) -> str:
        return CAPACITY_PROFILE if self.capacity else PROFILE

    def record(self) -> Recorded:
        """The recording sessions: `--update-baselines` into `rootdir` on `record_nights`
        recording nights, each its own noise (the first is the recording night of one), with
        --llmperf-baseline-nights `record_nights`: each entry's level is their median."""
        options = night_options(
            update=True,
            flags={"llmperf_profile": self.profile, "llmperf_baseline_nights": str(self.record_nights)},
        )
        starts, run_s = 0, 0.0
        for k in range(self.record_nights):
            noise = self.model.night(self.seed, "record" if k == 0 else f"record:{k}", recording=True)
            result = night(self.rootdir, self.items, self.model, noise, self.prompts, self.datasets, options=options)
            starts, run_s = starts + result.starts, run_s + result.run_s
            bad = {test: outcome for test, outcome in result.outcomes.items() if outcome != "passed"}
            if bad or result.errors:
                return Recorded(len(result.gates), starts, run_s, f"{bad} {result.errors}")
        lines = tuple((c["server"], c["capacity"], c["line"]) for c in result.capacities)
        return Recorded(len(result.gates), starts, run_s, "", lines)

    def summary(self, index: int, result: Night, lines: bytes = b"") -> NightSummary:
        cells = [
            (g.nodeid.split("::")[1].split("[")[0], g.server, g.concurrency, v.metric, str(v.status))
            for g in result.gates
            for v in g.verdicts
        ]
        red = any(o == "failed" for o in result.outcomes.values())
        spent = gpu_s(result, self.model.start_s, len(self.servers))
        searched = tuple((c["server"], c["capacity"], c["seconds"] or 0.0) for c in result.capacities)
        return NightSummary(
            index, red, result.failing(), result.flagged(), cells, spent, result.starts, lines, searched
        )

    def capacity_under(self, scenario: Scenario) -> list[tuple[str, float | None]]:
        """Each touched server's capacity with `scenario`'s change, on the recording night's noise."""
        touched = {name for name in (s.name for s in self.servers) if scenario.flags(name, CAPACITY, CAPACITY_TEST)}
        subset = [item for item in self.items if any(s.name in touched for s in item.servers)]
        noise = self.model.night(self.seed, "record", recording=True)
        changes = scenario.changes(self.servers)
        result = night(
            self.rootdir, subset, self.model, noise, self.prompts, self.datasets, changes=changes, profile=self.profile
        )
        return [(c["server"], c["capacity"]) for c in result.capacities]

    def unchanged_chain(self, nights: range) -> list[NightSummary]:
        """Unchanged nights `nights` in order, one history between them. The NIGHTS_WINDOW
        nights before the first are run first and not counted (before night 0: nights -20 to
        -1, as weeks of nights a team has run), so every counted night reads a full window of
        values (and the night before), as one process running every night would have given it."""
        window = HistoryWindow(self.rootdir / f"history-unchanged-{nights.start}.jsonl")
        out = []
        for n in range(nights.start - NIGHTS_WINDOW, nights.stop):
            noise = self.model.night(self.seed, f"n{n}")
            result = night(
                self.rootdir,
                self.items,
                self.model,
                noise,
                self.prompts,
                self.datasets,
                history=window.path,
                confirm=self.confirm,
                design=self.design,
                profile=self.profile,
            )
            lines = window.after_session()
            if n >= nights.start:
                out.append(self.summary(n, result, lines))
        window.close()
        return out

    def episode(self, scenario: Scenario, e: int, prior: Sequence[bytes]) -> tuple[list[str], bool]:
        """Up to EPISODE_NIGHTS nights of `scenario`'s change (each only when the one before is
        not red), after the unchanged nights whose history lines are `prior`: per night "red",
        "suspect" or "" for the cells it touches, and whether the first night was a noisy one."""
        touched_models = scenario.models(self.servers)
        subset = [item for item in self.items if any(s.model in touched_models for s in item.servers)]
        changes = scenario.changes(self.servers)
        window = HistoryWindow(self.rootdir / f"history-{scenario.name.replace(' ', '_')}-{e}.jsonl", prior=prior)
        history = window.path
        seen: list[str] = []
        noises = [self.model.night(self.seed, f"{scenario.name}:{e}:{n}") for n in range(EPISODE_NIGHTS)]
        for noise in noises:
            result = night(
                self.rootdir,
                subset,
                self.model,
                noise,
                self.prompts,
                self.datasets,
                changes=changes,
                history=history,
                confirm=self.confirm,
                design=self.design,
                profile=self.profile,
            )
            window.after_session()
            touched = [st for t, s, _, m, st in result.flagged() if scenario.flags(s, m, t)]
            seen.append("red" if any(st != "suspect" for st in touched) else "suspect" if touched else "")
            if seen[-1] == "red":
                break
        window.close()
        return seen, noises[0].scale > 1.0


BENCHES: list[Bench] = []  # one per recording, the parent's, inherited by forked workers


def _record(r: int) -> tuple[int, Recorded]:
    return r, BENCHES[r].record()


def _chain(job: tuple[int, range]) -> tuple[int, list[NightSummary]]:
    r, nights = job
    return r, BENCHES[r].unchanged_chain(nights)


def _episode(job: tuple[int, int, int, list[bytes]]) -> tuple[int, int, int, tuple[list[str], bool]]:
    r, k, e, prior = job
    bench = BENCHES[r]
    return r, k, e, bench.episode(scenarios(bench.servers, bench.capacity)[k], e, prior)


def chains(nights: int, jobs: int) -> list[range]:
    """The unchanged nights cut into one run of consecutive nights per worker (each run
    starts with NIGHTS_WINDOW nights of warm-up)."""
    size = max(1, math.ceil(nights / jobs))
    return [range(start, min(start + size, nights)) for start in range(0, nights, size)]


def window_starts(nights: int, count: int) -> list[int]:
    """For `count` episodes, where each one's NIGHTS_WINDOW consecutive unchanged nights start
    among `nights`: spread over them (fewer nights than a window: all start at 0)."""
    span = max(nights - NIGHTS_WINDOW, 0)
    return [span * i // max(count, 1) for i in range(count)]


def priors(lines: Sequence[bytes], count: int) -> list[list[bytes]]:
    """For `count` episodes, the history lines of NIGHTS_WINDOW consecutive unchanged nights
    each, the windows spread over the nights judged (fewer nights: what there is)."""
    return [list(lines[start : start + NIGHTS_WINDOW]) for start in window_starts(len(lines), count)]


def recording_seed(seed: int, r: int) -> int | str:
    """Recording `r`'s seed: `seed` itself for the first, "<seed>.<r>" after it."""
    return seed if r == 0 else f"{seed}.{r}"


@dataclass
class Recording:
    """One recording's outcomes: its recording session, its unchanged nights in order, and
    per change (by its index in `scenarios`) each episode's nights and whether its first
    night was a noisy one."""

    recorded: Recorded
    nights: list[NightSummary] = field(default_factory=list)
    seen: dict[int, list[tuple[list[str], bool]]] = field(default_factory=dict)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nights", type=int, default=20, help="unchanged nights judged (default 20)")
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per change, up to three nights each (default: --nights, at most 10)",
    )
    parser.add_argument(
        "--recordings",
        type=int,
        default=1,
        help="independent recordings, each its own baseline recorded on its own night and followed by its own "
        "nights and episodes; above 1, each rate is printed as the mean over them with its spread (default 1)",
    )
    parser.add_argument("--double", action="store_true", help="every noise figure of the parameters file doubled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--confirm", type=int, default=None, help="--llmperf-confirm of every night (default: the plugin's, 2 nightly)"
    )
    parser.add_argument(
        "--design",
        choices=("adaptive", "two-stage"),
        default="adaptive",
        help="the session's auto repetitions (adaptive), or a fixed two-stage design (TwoStage) to compare",
    )
    parser.add_argument(
        "--paired",
        action="store_true",
        help="paired A/B nights, OLD against NEW on one box, through the plugin's paired session "
        "(benchmarks/paired_nights.py); --episodes: the nights of each change",
    )
    parser.add_argument(
        "--capacity",
        action="store_true",
        help=f"the suite's capacity tests ({CAPACITY_TEST}) in place of its fixed-concurrency ones, and capacity's "
        "changes",
    )
    parser.add_argument(
        "--record-nights",
        type=int,
        default=BASELINE_NIGHTS,
        help="recording nights of each baseline, its level their median (--llmperf-baseline-nights; default "
        f"{BASELINE_NIGHTS}, the plugin's)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the figures do not depend on it)")
    parser.add_argument("--params", type=Path, default=PARAMS)
    parser.add_argument("--quiet", action="store_true", help="no line per night or episode, only the tables")
    args = parser.parse_args(argv)
    if min(args.nights, args.jobs, args.recordings, args.record_nights) < 1 or (args.episodes or 0) < 0:
        parser.error("--nights, --jobs, --recordings and --record-nights must be at least 1, --episodes at least 0")
    if args.confirm is not None and args.confirm < 1:
        parser.error("--confirm must be at least 1")
    if args.episodes is None:
        args.episodes = min(args.nights, 10)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.paired:
        import paired_nights

        return paired_nights.run(args)
    model = NoiseModel.load(args.params, args.double)
    started = time.monotonic()
    items = seed_items(capacity=args.capacity)
    servers = all_servers(items)
    options = night_options()
    dataset = load_dataset(options.dataset_name, options.dataset, ROOT)
    datasets = {(options.dataset_name, options.dataset): dataset}
    prompts = SeedPrompts(dataset)
    profile = CAPACITY_PROFILE if args.capacity else PROFILE
    confirm = night_options(history=Path("history.jsonl"), confirm=args.confirm, flags={"llmperf_profile": profile})
    seeds = [recording_seed(args.seed, r) for r in range(args.recordings)]
    print(
        f"nights: the seed suite's {'capacity' if args.capacity else 'fixed-concurrency'} tests ({len(items)} tests, "
        f"{len(servers)} servers) at the {profile} profile through "
        f"PerfSession on the virtual clock, --llmperf-confirm {confirm.confirm}; {args.nights} unchanged nights, "
        f"{args.episodes} episodes per change (up to three nights each); noise {args.params.name}"
        f"{' doubled' if args.double else ''}: start spread "
        f"{', '.join(f'{v:.1%} at {c}' for c, v in model.step.items())}, acceptance {model.acceptance:.1%}, "
        f"t({model.dof:g}) tails, slow starts {model.slow_share:.0%} x +{model.slow_excess:.0%}, night shift "
        f"{model.shift:.1%}, noisy nights {model.noisy_share:.0%} x{model.noisy_multiplier:g}; seed {args.seed}; "
        f"each baseline recorded on {args.record_nights} night{'s' if args.record_nights > 1 else ''}"
        + (f"; {args.recordings} recordings, seeds {seeds[0]} to {seeds[-1]}" if args.recordings > 1 else "")
        + (f"; {args.design} design" if args.design != "adaptive" else ""),
        flush=True,
    )

    def say(line: str) -> None:
        if not args.quiet:
            print(f"{line} ({time.monotonic() - started:.0f} s)", flush=True)

    names = [scenario.name for scenario in scenarios(servers, args.capacity)]
    with tempfile.TemporaryDirectory(prefix="llmperf-nights-") as tmp:
        BENCHES[:] = [
            Bench(
                Path(tmp, f"recording-{r}"),
                items,
                servers,
                model,
                prompts,
                datasets,
                seed,
                args.confirm,
                args.design,
                args.capacity,
                args.record_nights,
            )
            for r, seed in enumerate(seeds)
        ]
        for bench in BENCHES:
            bench.rootdir.mkdir()
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            recordings = record_all(pool, say, started)
            if recordings is None:
                return 1
            if args.capacity:
                print_capacity_changes(BENCHES[0], recordings[0].recorded)
            run_unchanged(pool, recordings, args.nights, args.jobs, say)
            if len(recordings) == 1:
                print_unchanged(recordings[0].nights)
                print()
            run_changes(pool, recordings, names, args.episodes, say)
    report(recordings, names, model, len(servers), args.nights, args.episodes)
    if args.capacity:
        print_capacities(recordings)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


def label(r: int) -> str:
    """How a line about recording `r` starts ("" where there is one recording)."""
    return f"recording {r + 1}/{len(BENCHES)}: " if len(BENCHES) > 1 else ""


def record_all(pool: Any, say: Callable[[str], None], started: float) -> list[Recording] | None:
    """Every bench's recording session (None, said on stderr, where one did not pass)."""
    recorded: dict[int, Recorded] = {}
    for r, result in pool.imap_unordered(_record, range(len(BENCHES))):
        if result.failed:
            print(f"{label(r)}recording failed: {result.failed}", file=sys.stderr)
            return None
        recorded[r] = result
        if len(BENCHES) > 1:
            say(
                f"  {label(r)}seed {BENCHES[r].seed}: {result.assertions} assertions, {result.starts} server starts, "
                f"{result.run_s / 60:.1f} GPU-min of runs"
            )
    every = [recorded[r] for r in range(len(BENCHES))]
    counts = {(result.assertions, result.starts) for result in every}
    runs = statistics.mean(result.run_s for result in every)
    many = f"{len(every)} baselines, each " if len(every) > 1 else ""
    starts = every[0].starts if len(counts) == 1 else f"{statistics.mean(result.starts for result in every):.1f}"
    print(
        f"recorded: {many}{every[0].assertions} assertions, {starts} server starts, {runs / 60:.1f} GPU-min of runs"
        f"{' (mean)' if len(every) > 1 else ''} ({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    for server, _, line in every[0].capacities:
        print(f"  {server}: {line}{' (the first recording)' if len(every) > 1 else ''}", flush=True)
    return [Recording(result) for result in every]


def run_unchanged(pool: Any, recordings: list[Recording], nights: int, jobs: int, say: Callable[[str], None]) -> None:
    """Each recording's unchanged nights, in runs of consecutive nights over the workers."""
    per = max(1, jobs // len(recordings))
    work = [(r, chain) for r in range(len(recordings)) for chain in chains(nights, per)]
    for r, chain in pool.imap_unordered(_chain, work):
        for summary in chain:
            shown = ", ".join(f"{s} @ {c} {m} {st}" for _, s, c, m, st in summary.flagged)
            say(
                f"  {label(r)}night {summary.index + 1}/{nights}: {'RED' if summary.red else 'green'}"
                f"{' ' + shown if shown else ''}; {summary.starts} starts, {summary.gpu_s / 60:.1f} GPU-min"
            )
        recordings[r].nights += chain
    for recording in recordings:
        recording.nights.sort(key=lambda s: s.index)


def run_changes(
    pool: Any, recordings: list[Recording], names: Sequence[str], episodes: int, say: Callable[[str], None]
) -> None:
    """Each recording's episodes of each change, each from a window of its unchanged nights' history."""
    work = []
    for r, recording in enumerate(recordings):
        windows = priors([s.lines for s in recording.nights], episodes)
        work += [(r, k, e, windows[e]) for k in range(len(names)) for e in range(episodes)]
    for r, k, e, (nights_seen, noisy_first) in pool.imap_unordered(_episode, work):
        recordings[r].seen.setdefault(k, []).append((nights_seen, noisy_first))
        what = ", ".join(f"night {i + 1} {w or 'green'}" for i, w in enumerate(nights_seen))
        say(f"  {label(r)}{names[k]}: episode {e + 1}/{episodes}: {what}")


def report(
    recordings: Sequence[Recording], names: Sequence[str], model: NoiseModel, servers: int, nights: int, episodes: int
) -> None:
    """The changes' table and the GPU-minutes of one recording; of several, the unchanged
    nights pooled, then each rate's mean and spread over recordings, and the first night's
    flags by quiet and noisy first nights, all recordings' episodes together."""
    fixed = servers * sum(SEED_FIXED_S.values())
    if len(recordings) == 1:
        (only,) = recordings
        print_changes(names, only.seen, episodes)
        night_s = [s.gpu_s for s in only.nights]
        mean_s = statistics.mean(night_s)
        print()
        print(
            f"GPU-minutes a night (simulated runs, plus {model.start_s:g} s for each server start beyond one per "
            f"server): mean {mean_s / 60:.1f}, max {max(night_s) / 60:.1f}, against {fixed / 60:.1f} for the seeds' "
            f"fixed runs ({mean_s / fixed:.0%})"
        )
        return
    print_unchanged([s for recording in recordings for s in recording.nights], f"{len(recordings)} recordings")
    rows = [recording_rates(recording.nights, recording.seen, names) for recording in recordings]
    print_spreads(aggregate(rows), len(recordings), nights, episodes, fixed / 60)
    print()
    print("flagged night 1, quiet / noisy first nights (all recordings' episodes together):")
    for k, name in enumerate(names):
        runs = [run for recording in recordings for run in recording.seen.get(k, [])]
        quiet = [bool(r[0]) for r, noisy in runs if not noisy]
        loud = [bool(r[0]) for r, noisy in runs if noisy]
        print(f"  {name:<40} {share(sum(quiet), len(quiet))} / {share(sum(loud), len(loud))}")


def print_capacity_changes(bench: Bench, recorded: Recorded) -> None:
    """What each change does to the capacities, on the recording night's noise (the first recording's)."""
    before = {server: capacity for server, capacity, _ in recorded.capacities}
    print("each change's capacity on the recording night's noise (recorded -> with the change):")
    for scenario in scenarios(bench.servers, capacity=True):
        moved = [
            f"{server} {users(before.get(server))} -> {users(capacity)}"
            for server, capacity in bench.capacity_under(scenario)
        ]
        print(f"  {scenario.name}: {'; '.join(moved)}", flush=True)


def users(capacity: float | None) -> str:
    return "none" if capacity is None else f"{capacity:g}"


def print_capacities(recordings: Sequence[Recording]) -> None:
    """Each server's capacity over the unchanged nights (how often each value was found) and
    what a search cost, against the seeds' fixed run at 32."""
    found: dict[str, Counter[float | None]] = {}
    cost: dict[str, list[float]] = {}
    for recording in recordings:
        for summary in recording.nights:
            for server, capacity, seconds in summary.capacities:
                found.setdefault(server, Counter())[capacity] += 1
                cost.setdefault(server, []).append(seconds)
    print()
    print(
        "capacity over the unchanged nights (users: nights), and a search's GPU-minutes (its runs and fresh starts) "
        f"against {SEED_FIXED_S[32] / 60:.1f} for the seeds' fixed run at 32:"
    )
    for server, counts in found.items():
        values = ", ".join(f"{users(c)}: {k}" for c, k in sorted(counts.items(), key=lambda ck: ck[0] or 0))
        mean_min = statistics.mean(cost[server]) / 60
        print(
            f"  {server:<26} {values};  {mean_min:.1f} GPU-min a search, max {max(cost[server]) / 60:.1f} "
            f"({mean_min * 60 / SEED_FIXED_S[32]:.1f}x)"
        )


def print_unchanged(summaries: Sequence[NightSummary], of: str = "") -> None:
    """The unchanged nights' table (`of`: whose nights they are, where not one recording's)."""
    nights = len(summaries)
    red = [s for s in summaries if s.red]
    suspects = sum(suspect(s) for s in summaries)
    cells = {cell[:4] for s in summaries for cell in s.cells}
    statuses = Counter(cell[4] for s in summaries for cell in s.cells)
    total = sum(statuses.values())
    fails = Counter(cell[:4] for s in summaries for cell in s.failing)
    print()
    print(
        f"unchanged nights{' of ' + of if of else ''}: {len(red)} of {nights} red ({len(red) / nights:.1%}); "
        f"{len(cells)} gated cells; {suspects} with a suspect cell ({suspects / nights:.1%})"
    )
    if red:
        per = [len(s.failing) for s in red]
        print(f"failing cells per red night: mean {statistics.mean(per):.1f}, max {max(per)}")
    print(
        "verdicts over all cells and nights: "
        + ", ".join(f"{s} {k / total:.1%}" for s, k in sorted(statuses.items(), key=lambda kv: -kv[1]))
    )
    print("per-cell false-red rate (cells that were ever red; the others 0):")
    for (test, server, c, metric), k in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {test:<32} {server:<26} {c:>3}  {metric:<20} {k / nights:6.1%}")
    if not fails:
        print("  none")
    print(f"  mean over the {len(cells)} cells: {sum(fails.values()) / max(1, len(cells) * nights):.2%}")


def print_changes(
    names: Sequence[str], seen: Mapping[int, Sequence[tuple[Sequence[str], bool]]], episodes: int
) -> None:
    """The table of changes, and the first night's flags split by whether that night was a
    noisy one (the noise model's `noisy_night`): what the noisy nights cost the detection."""
    print()
    print(f"changes ({episodes} episodes of up to three nights each; a cell the change touches is red or suspect)")
    print(
        f"{'change':<42} {'flagged night 1':>16} {'red night 1':>12} {'red within 2':>13} {'red within 3':>13}"
        f"   {'flagged night 1: quiet / noisy first nights':>44}"
    )
    for k, name in enumerate(names):
        runs = seen.get(k, [])
        if not runs:
            continue
        rates = change_rates(name, [r for r, _ in runs])
        flagged, first, within, within3 = (rates[name, figure] for figure in CHANGE_FIGURES)
        quiet = [bool(r[0]) for r, noisy in runs if not noisy]
        loud = [bool(r[0]) for r, noisy in runs if noisy]
        split = f"{share(sum(quiet), len(quiet))} / {share(sum(loud), len(loud))}"
        print(f"{name:<42} {flagged:>15.0%} {first:>11.0%} {within:>12.0%} {within3:>12.0%}   {split:>44}")


if __name__ == "__main__":
    raise SystemExit(main())
