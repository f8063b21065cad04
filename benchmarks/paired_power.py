"""How often is a paired A/B verdict right? NEW judged against OLD on the same box, by the
plugin's own paired session, on the virtual clock, with noise between server starts.

    python benchmarks/paired_power.py --trials 100
    python benchmarks/paired_power.py --trials 3                    # a quick smoke
    python benchmarks/paired_power.py --trials 100 --tolerances 'steady_decode_tok_s = 3%'

Each trial is one paired pytest session of the seed suite's Qwen3.6-27B tests at one
concurrency (tests/perf/test_seed_suite.py: the base server's test, the MTP server's test
and the speedup test, in the order the plugin runs them), as `pytest --llmperf-sim
--llmperf-profile nightly --llmperf-against-sim-args=OLD --llmperf-sim-args=NEW` runs it:
the plugin's `llmperf` fixture object over a real PerfSession (benchmarks/nights.py's
run_session), whose target and runner are benchmarks/nightsim.py's (virtual servers, the
simulator's engine on its virtual clock). OLD is the simulator's defaults; NEW is OLD
with `--sim-step-time-scale` set by the scenario (both servers changed alike, as a new
image would change them). What runs, in which order, how many blocks auto adds and how
each metric is judged is the session's (pytest_llmperf/judging/paired.py); the benchmark only
counts the verdicts.

Before its sessions, each trial records a baselines folder (`--update-baselines`, the
seed suite's four servers at the concurrency, auto's repetitions), as a user's folder
recorded on an earlier day: a paired session judges nothing against it but pools its
spread between starts. The scenarios of a trial share its folder and its noise draws.

Noise (benchmarks/noise_params.json, as nights.py draws it, each figure with its source):
a spread between server starts per concurrency with Student-t tails, an occasional slow
start, acceptance rates per start, a shift of the whole box per trial (shared by OLD and
NEW) and noisier boxes than the recording's. `--drift X` adds a slow drift of the box over
the session: the k-th server start of a trial runs its steps x (1 + X k), which the
alternating block order spreads over both sides.

Scenarios (NEW against OLD): no change (OLD == NEW), NEW 5 % slower (steps x 1/0.95),
NEW's steps x 1.05 (docs/judging.md's example: decode -4.8 %) and NEW 10 % slower.

Prints per scenario and metric of the MTP server (its test's gated metrics and the
speedup test's mtp_speedup) the share of trials regressed / inconclusive / pass / other
(improved, invalid, no-data), then the MTP test's outcome as pytest would have it (fails
in the regressed column, warns in the inconclusive one, passes in pass) and the MTP
server's blocks (its server starts over two). What to read: an OLD == NEW session should
pass, and a NEW 5 % slower one at concurrency 32 be read regressed (the gated decode
figure's default tolerance is 3 %, so NEW's steps x 1.05 lies beyond it too);
`--tolerances` judges with other tolerances, as the ini's llmperf_tolerances.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from nights import (  # noqa: E402
    PARAMS,
    Item,
    NoiseModel,
    SeedPrompts,
    night_options,
    run_session,
    seed_items,
)
from nightsim import Draw, StartNoise, VirtualRunner, VirtualTarget  # noqa: E402

from pytest_llmperf.baselines.compare import Verdict  # noqa: E402
from pytest_llmperf.baselines.judgement import GateRecord  # noqa: E402
from pytest_llmperf.baselines.store import BaselineStore  # noqa: E402
from pytest_llmperf.options import LlmperfOptions  # noqa: E402
from pytest_llmperf.servers.spec import ServerSpec  # noqa: E402
from pytest_llmperf.workload.prompts import load_dataset  # noqa: E402

MODEL = "qwen3.6-27b-fp8"  # the paired tests' base server; its MTP variant is MODEL-mtp
MTP_TEST, SPEEDUP_TEST = "test_mtp_decode_and_acceptance", "test_mtp_speedup"
SCENARIOS = {
    "OLD == NEW": 1.0,
    "NEW 5% slower": 1 / 0.95,
    "NEW steps x1.05": 1.05,
    "NEW 10% slower": 1 / 0.90,
}
OUTCOMES = ("regressed", "inconclusive", "pass")
TEST_OUTCOMES = {"failed": "regressed", "warned": "inconclusive", "passed": "pass"}  # the table's columns


def new_flags(step_scale: float) -> str:
    """NEW's simulator flags (--llmperf-sim-args) for a scenario's step factor."""
    return "" if step_scale == 1.0 else f"--sim-step-time-scale {step_scale!r}"


def drifting(draw: Draw, drift: float) -> Draw:
    """`draw` with the box drifting: the k-th start (from 0) of the target, whatever its
    server, has every step cost times 1 + drift k."""
    if not drift:
        return draw
    starts = itertools.count()

    def start(spec: ServerSpec, count: int) -> StartNoise:
        noise = draw(spec, count)
        factor = 1.0 + drift * next(starts)
        return StartNoise({c: f * factor for c, f in noise.step.items()}, noise.acceptance, noise.sim_args)

    return start


@dataclass
class Trial:
    """One paired session's gate records, test outcomes (passed, failed, warned) and the
    MTP server's blocks."""

    gates: list[GateRecord]
    outcomes: dict[str, str]
    blocks: int

    def verdicts(self) -> dict[str, Verdict]:
        """The MTP server's verdicts by metric: its test's gated metrics, then the speedup's."""
        out: dict[str, Verdict] = {}
        for test in (MTP_TEST, SPEEDUP_TEST):
            for gate in self.gates:
                if function_of(gate.nodeid) == test:
                    out.update({v.metric: v for v in gate.verdicts})
        return out

    def mtp_test(self) -> str:
        """The MTP test's outcome as pytest would have it: passed, failed or warned."""
        return next(o for nodeid, o in self.outcomes.items() if function_of(nodeid) == MTP_TEST)


def function_of(nodeid: str) -> str:
    """A node id's test function: test_mtp_speedup of 'tests/...::test_mtp_speedup[qwen...-32]'."""
    return nodeid.split("::")[1].split("[")[0]


@dataclass
class PairedBench:
    """What every trial shares: the suite, the noise model, the prompts, and where the
    trials' baselines folders live. `flags`: more command-line values of the paired
    sessions by option dest (--llmperf-repetitions, --llmperf-max-repetitions); `ini`:
    their ini values (llmperf_tolerances); `stored_reps`: the recording sessions'
    --llmperf-repetitions (None: auto's, 0: no folder is recorded)."""

    rootdir: Path
    items: list[Item]
    model: NoiseModel
    prompts: SeedPrompts
    datasets: Mapping[tuple[str, str | None], Any]
    seed: int = 0
    drift: float = 0.0
    flags: Mapping[str, Any] = field(default_factory=dict)
    ini: Mapping[str, Any] = field(default_factory=dict)
    stored_reps: int | None = None
    folders: dict[tuple[int, int], Path] = field(default_factory=dict)

    @classmethod
    def load(cls, rootdir: Path, params: Path = PARAMS, **kwargs: Any) -> PairedBench:
        """The seed suite's tests, the noise of `params` and the nightly prompts."""
        options = night_options()
        dataset = load_dataset(options.dataset_name, options.dataset, HERE.parent)
        datasets = {(options.dataset_name, options.dataset): dataset}
        return cls(rootdir, seed_items(), NoiseModel.load(params), SeedPrompts(dataset), datasets, **kwargs)

    def at(self, concurrency: int) -> list[Item]:
        """The suite's tests at `concurrency` (all four servers), in the plugin's order."""
        return [item for item in self.items if item.params.get("concurrency") == concurrency]

    def paired_items(self, concurrency: int) -> list[Item]:
        """MODEL's three tests at `concurrency`: base, MTP, speedup."""
        return [item for item in self.at(concurrency) if item.marker["server"].name in (MODEL, f"{MODEL}-mtp")]

    def options(self, step_scale: float) -> LlmperfOptions:
        """The paired session's options: OLD the simulator's defaults, NEW `step_scale`'s flags."""
        flags = {"llmperf_against_sim_args": "", "llmperf_sim_args": new_flags(step_scale), **self.flags}
        return night_options(flags=flags, ini=self.ini)

    def folder(self, concurrency: int, index: int) -> Path:
        """Trial `index`'s rootdir at `concurrency`, its baselines folder recorded there the
        first time it is asked for (a recording session of the suite's tests there)."""
        key = (concurrency, index)
        if key in self.folders:
            return self.folders[key]
        rootdir = self.rootdir / f"trial-{concurrency}-{index}"
        rootdir.mkdir(parents=True)
        if self.stored_reps != 0:
            reps = {} if self.stored_reps is None else {"llmperf_repetitions": str(self.stored_reps)}
            noise = self.model.night(self.seed, f"paired-record:{concurrency}:{index}", recording=True)
            recorded = run_session(
                rootdir,
                self.at(concurrency),
                VirtualTarget(self.model.draw(noise)),
                VirtualRunner(),
                self.prompts,
                self.datasets,
                start_s=self.model.start_s,
                options=night_options(update=True, flags=reps),
            )
            bad = {k: v for k, v in recorded.outcomes.items() if v != "passed"}
            if bad or recorded.errors:
                raise RuntimeError(f"recording trial {index}'s baselines failed: {bad} {recorded.errors}")
        self.folders[key] = rootdir
        return rootdir

    def trial(self, concurrency: int, step_scale: float, index: int) -> Trial:
        """Trial `index` of a scenario: one paired session of MODEL's tests at `concurrency`,
        NEW's steps times `step_scale`, in the trial's rootdir (folder())."""
        rootdir = self.folder(concurrency, index)
        noise = self.model.night(self.seed, f"paired:{concurrency}:{index}")
        target = VirtualTarget(drifting(self.model.draw(noise), self.drift))
        night = run_session(
            rootdir,
            self.paired_items(concurrency),
            target,
            VirtualRunner(),
            self.prompts,
            self.datasets,
            start_s=self.model.start_s,
            options=self.options(step_scale),
        )
        if night.errors.keys() - night.outcomes.keys():  # a failing test's message is an error too
            raise RuntimeError(f"trial {index}: the session did not finish cleanly: {night.errors}")
        return Trial(night.gates, night.outcomes, target.starts.get(f"{MODEL}-mtp", 0) // 2)


def stored_samples(rootdir: Path, concurrency: int, metric: str) -> dict[str, list[float]]:
    """A trial's recorded baselines folder at `concurrency`: each server's per-repetition
    samples of `metric`, as the store reads them."""
    store = BaselineStore(rootdir / night_options().baselines_dir)
    out: dict[str, list[float]] = {}
    for server, _, entry in store.entries_at(VirtualTarget.name, concurrency):
        samples = entry["metrics"].get(metric, {}).get("samples") or []
        out[server] = [v for v in samples if v is not None]
    return out


def tally(trials: Sequence[Trial]) -> tuple[dict[str, dict[str, int]], list[int]]:
    """Per metric of the MTP server and for the MTP test: trials by outcome; and the blocks."""
    counts: dict[str, dict[str, int]] = {}
    for t in trials:
        for name, verdict in t.verdicts().items():
            status = str(getattr(verdict.status, "value", verdict.status))
            counts.setdefault(name, {})[status] = counts.setdefault(name, {}).get(status, 0) + 1
    test = counts.setdefault("MTP test", {})
    for t in trials:
        column = TEST_OUTCOMES[t.mtp_test()]
        test[column] = test.get(column, 0) + 1
    return counts, [t.blocks for t in trials]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32], choices=[1, 8, 32])
    parser.add_argument("--blocks", default="auto", help="--llmperf-repetitions: a count of blocks, or auto (default)")
    parser.add_argument(
        "--max-blocks", type=int, default=None, help="--llmperf-max-repetitions: auto's budget (default: the plugin's)"
    )
    parser.add_argument("--drift", type=float, default=0.0, help="step-time drift per server start (0.002: 0.2%%)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stored-reps",
        type=int,
        default=None,
        help="--llmperf-repetitions of each trial's recording session (default: auto's; 0: no baselines recorded)",
    )
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS), metavar="S")
    parser.add_argument(
        "--tolerances", default="", help="overrides as the ini's llmperf_tolerances: 'steady_decode_tok_s = 3%%, ...'"
    )
    parser.add_argument("--params", type=Path, default=PARAMS)
    parser.add_argument(
        "--show-alarms",
        action="store_true",
        help="print each false alarm (OLD == NEW read regressed): the trial, its blocks, and the metric's change "
        "and noise",
    )
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    flags = {"llmperf_repetitions": args.blocks}
    if args.max_blocks is not None:
        flags["llmperf_max_repetitions"] = str(args.max_blocks)
    lines = [line.strip() for line in args.tolerances.split(",") if line.strip()]
    ini = {"llmperf_tolerances": lines} if lines else {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llmperf-paired-") as tmp:
        bench = PairedBench.load(
            Path(tmp),
            args.params,
            seed=args.seed,
            drift=args.drift,
            flags=flags,
            ini=ini,
            stored_reps=args.stored_reps,
        )
        options = bench.options(1.0)  # the flags are checked here, before any trial
        print(
            f"paired power: {args.trials} trials per scenario through the plugin's paired session "
            f"(--llmperf-against-sim-args, nightly profile), {MODEL} and {MODEL}-mtp; blocks "
            f"{options.repetitions} (max {options.max_repetitions}); drift {args.drift:g} per start; "
            f"baselines folder per trial: {args.stored_reps if args.stored_reps is not None else 'auto'} "
            f"rep(s) x 4 servers; noise {args.params.name}; tolerances: {args.tolerances or 'defaults'}",
            flush=True,
        )
        print(f"{'conc':>4}  {'scenario':<16} {'metric':<20} " + " ".join(f"{o:>12}" for o in (*OUTCOMES, "other")))
        for c in args.concurrency:
            for scenario in args.scenarios:
                trials = []
                for i in range(args.trials):
                    trial = bench.trial(c, SCENARIOS[scenario], i)
                    trials.append(trial)
                    if args.show_alarms and SCENARIOS[scenario] == 1.0:
                        for name, v in trial.verdicts().items():
                            if v.status == "regressed" and v.change is not None:
                                print(
                                    f"      trial {i}: {name} regressed at {trial.blocks} blocks, change "
                                    f"{v.change.relative:+.2%} ({v.change.absolute:+.4g}), noise +/-{v.noise:.4g}"
                                )
                counts, blocks = tally(trials)
                for name, got in counts.items():
                    other = args.trials - sum(got.get(o, 0) for o in OUTCOMES)
                    cells = " ".join(f"{100 * k / args.trials:11.1f}%" for k in [*(got.get(o, 0) for o in OUTCOMES)])
                    print(f"{c:>4}  {scenario:<16} {name:<20} {cells} {100 * other / args.trials:11.1f}%")
                print(f"{c:>4}  {scenario:<16} MTP blocks: mean {statistics.mean(blocks):.2f}, max {max(blocks)}")
                sys.stdout.flush()
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
