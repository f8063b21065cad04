"""How often is the gate wrong? False alarms, detection and inconclusive rates of the
verdict rule, on the simulator's virtual clock with noise between server starts.

    python benchmarks/verdict_power.py --trials 1000                    # nightly defaults: auto
    python benchmarks/verdict_power.py --trials 1000 --baseline-reps 1 --measured-reps 1
    python benchmarks/verdict_power.py --trials 100 --prompts synthetic --sqrt-rule     # the rule before

Each trial is one comparison as a user's CI makes it: a baseline recorded from
`--baseline-reps` runs (each its own server start, as the plugin makes them; 5, as auto
records), then `--measured-reps` runs of the same workload (`auto`, the nightly default:
one, then one more on a fresh start while a gated metric of the seed suite's MTP test
(steady decode, acceptance rate and length, TPOT) is inconclusive and could be decided
within `--max-reps`, or regressed at the first look (read again, unless --no-confirm);
then the seed suite's speedup test, on the runs that made, adding its own the same way),
judged by the
plugin's own rule (baselines/compare.py with stats/error.py: the spread between repetitions, or where
none is known the paired block bootstrap of metrics/uncertainty.py) with the
default tolerances; the spread between starts pooled, as the session pools it, over the
suite's other cells at that concurrency (the 27B base server's baseline, and stand-ins of
the 35B pair: the same profiles with starts of their own; --no-pool judges without).
Workload: the `nightly` profile of the seed suite (workload.PROFILE_SCALE: max(16 x c, 64)
prompts, a 60 s cap below 8 streams, 100 s from 8 and 150 s from 16, max_tokens 256),
Qwen3.6-27B base and MTP (k = 3) profiles. Its prompts: the seed suite's ShareGPT file
sampled as the plugin samples it, texts and all (the simulator drafts by the text), or
with `--prompts synthetic` the calibration's synthetic lengths (what the tables before
used: they catch a 5 % drop at 32 streams far more often, docs/verdicts.md).

Noise between server starts (the simulator's --sim-run-noise / --sim-acceptance-noise,
drawn per run here): a step-time factor exp(N(0, s)) with s by concurrency from the
public figures (speculative decoding's run-to-run throughput spread ~10-20 % at
concurrency 1-4, ~1 % at 8 and above: s = 7 % at 1, 1 % at 8 and 32), and an acceptance
factor 1 + N(0, 1 %).

Scenarios, applied to the measured runs of the MTP server (the base server unchanged):
no change; MTP steps 5 % and 10 % slower (decode -5 % / -10 %, and the same drop of the
MTP speedup); acceptance scaled down by 0.03 / rate (acceptance rate -0.03).

The base server's own seed test (steady decode, TPOT median, TTFT median) is judged
first, with its own auto repetitions, on the measured base runs every scenario shares;
its outcomes with no change are printed per concurrency, and its repetitions count in
the device time.

Prints per concurrency and metric: false alarms (regressed with no change), the share
inconclusive with no change, detection (regressed) for each change, and the share of
each change left inconclusive. Also the device time the seed suite's fixed runs take
on the seeds' hardware against this workload's (the simulated durations are the
modelled GPU's), with a model load (`--load-s`) for every added repetition.
"""

from __future__ import annotations

import argparse
import collections
import functools
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_llmperf.baselines.compare import (  # noqa: E402
    DEFAULT_ALARM_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    compare,
    wanting_another,
)
from pytest_llmperf.baselines.tolerances import parse_tolerance_overrides, tolerance_for  # noqa: E402
from pytest_llmperf.metrics import registry  # noqa: E402
from pytest_llmperf.metrics.registry import GATED_DECODE  # noqa: E402
from pytest_llmperf.metrics.steady import steady_tok_s  # noqa: E402
from pytest_llmperf.metrics.uncertainty import independent_blocks, paired_errors  # noqa: E402
from pytest_llmperf.sim import tokenizer  # noqa: E402
from pytest_llmperf.sim.calibration import MTP3, synthetic_prompt_lens  # noqa: E402
from pytest_llmperf.sim.config import SimConfig  # noqa: E402
from pytest_llmperf.sim.virtual import VirtualResult, run_virtual  # noqa: E402
from pytest_llmperf.stats.error import change_error, ratio_error  # noqa: E402
from pytest_llmperf.stats.spread import pooled_spread  # noqa: E402
from pytest_llmperf.workload.config import GRACE_SECONDS  # noqa: E402
from pytest_llmperf.workload.dataset import find_dataset, load_sharegpt, sample_requests  # noqa: E402
from pytest_llmperf.workload.workload import profile_scale  # noqa: E402

MODEL = "Qwen/Qwen3.6-27B-FP8"
CONCURRENCIES = (1, 8, 32)
STEP_NOISE = {1: 0.07, 8: 0.01, 32: 0.01}
ACCEPTANCE_NOISE = 0.01
MAX_TOKENS = 256
# Each run's time cap, in the simulated GPU's seconds, where --max-seconds sets one: else
# the nightly profile's at the run's concurrency.
CAP_S: float | None = None
METRICS = ("decode_tok_s", GATED_DECODE, "tpot_ms_median", "acceptance_rate", "acceptance_length", "mtp_speedup")
GATED = (GATED_DECODE, "acceptance_rate", "acceptance_length", "tpot_ms_median")  # the seed MTP test
BASE_GATED = (GATED_DECODE, "tpot_ms_median", "ttft_ms_median")  # the seed base test
# The seeds' fixed runs on their hardware, seconds per server (300 s caps at 1 and 8,
# 627 s for 1000 prompts at 32), for two models, base and MTP.
SEED_FIXED_S = {1: 300.0, 8: 300.0, 32: 627.0}


def nightly_prompts(c: int) -> int:
    per_stream, minimum, _ = profile_scale("nightly", c)
    return max(per_stream * c, minimum)


def cap_s(c: int) -> float:
    """A run's time cap at concurrency `c`: --max-seconds', else the nightly profile's."""
    return CAP_S if CAP_S is not None else profile_scale("nightly", c)[2]


@dataclass
class Run:
    result: VirtualResult
    figures: dict[str, float]


def one_run(
    c: int,
    speculative: bool,
    lens: list[int],
    rng: random.Random,
    step_scale: float = 1.0,
    acceptance_scale: float = 1.0,
    texts: list[str] | None = None,
) -> Run:
    step = step_scale * pow(2.718281828459045, rng.gauss(0.0, STEP_NOISE[c]))
    acc = acceptance_scale * max(0.0, 1.0 + rng.gauss(0.0, ACCEPTANCE_NOISE)) if speculative else 1.0
    cfg = SimConfig(
        model=MODEL,
        max_num_seqs=32,
        max_model_len=65536,
        speculative_config=dict(MTP3) if speculative else None,
        step_time_scale=step,
        acceptance_scale=min(acc, 10.0),
    )
    return virtual_run(cfg, lens, c, texts)


def virtual_run(cfg: SimConfig, lens: list[int], c: int, prompts: list[str] | None = None) -> Run:
    """The nightly workload at concurrency `c` on the virtual clock, and its gated figures.
    Requests still running GRACE_SECONDS after the cap are cut, as the plugin's runner cuts
    them on a GPU, and left out of the figures as the plugin leaves them out."""
    r = run_virtual(
        cfg,
        lens,
        c,
        MAX_TOKENS,
        num_prompts=nightly_prompts(c),
        max_seconds=cap_s(c),
        prompts=prompts,
        grace_seconds=GRACE_SECONDS,
    )
    figures = {
        "decode_tok_s": r.decode_tok_s,
        GATED_DECODE: steady_tok_s(r.spans, c) or 0.0,
        "tpot_ms_median": r.tpot_median * 1000.0,
        "ttft_ms_median": r.ttft_median * 1000.0,
    }
    if r.drafts:
        figures["acceptance_length"] = 1.0 + r.accepted / r.drafts
        figures["acceptance_rate"] = r.accepted / r.draft_tokens
    return Run(r, figures)


def sharegpt_prompts(count: int) -> tuple[list[int], list[str]]:
    """The seed suite's nightly prompts: `count` of its ShareGPT file sampled as the plugin
    samples them (seed 0), counted by the simulated server's tokenizer (its /tokenize)."""
    conversations = load_sharegpt(find_dataset(None, ROOT))
    requests = sample_requests(
        conversations, count, seed=0, count_tokens=lambda texts: [len(tokenizer.encode(t)) for t in texts]
    )
    return [q.prompt_len for q in requests], [q.prompt for q in requests]


def median_of(runs: list[Run], name: str) -> float:
    return statistics.median(run.figures[name] for run in runs)


def speedups(mtp: list[Run], base: list[Run]) -> list[float]:
    """The speedup's repetitions as the session pairs them (MeasuredRun.speedup_samples):
    repetition by repetition when both servers ran as many, else each MTP repetition over
    the base server's median."""
    if len(mtp) == len(base):
        return [m.figures[GATED_DECODE] / b.figures[GATED_DECODE] for m, b in zip(mtp, base)]
    level = median_of(base, GATED_DECODE)
    return [m.figures[GATED_DECODE] / level for m in mtp]


def worth_another(
    runs: int,
    budget: int,
    verdicts: dict,
    gated: tuple[str, ...] = GATED,
    stop_on_change: bool = True,
    project: bool = True,
    first_look: bool = False,
    confirm: bool = True,
) -> list[str]:
    """The session's rule (Measurer.worth_another, compare.wanting_another): go on
    while some inconclusive gated verdict could be decided within the budget
    (Verdict.decidable), or, with `confirm`, one is regressed at the gate's `first_look` (its
    first judgement: a regression is read again before it is reported); from the second run on by
    the change as read, unless `stop_on_change` is False (a paired session's rule: by the
    noise alone); `project`: by the part of the noise more measured runs take off (the
    session's), else as if all of it fell with the square root of the runs. The metrics
    that ask for another run (empty: stop)."""
    return wanting_another(
        [v for name, v in verdicts.items() if name in gated],
        runs,
        budget,
        by_change=stop_on_change and runs >= 2,
        project=project,
        confirm=confirm and first_look,
    )


def judge_base(
    c: int,
    base_b: list[Run],
    base_m: list[Run],
    confidence: float,
    tolerances: dict | None,
    others: list[list[Run]],
) -> dict:
    """The seed base test's verdicts (BASE_GATED), as the session computes them; `others`:
    the other cells recorded at this concurrency, whose spread between starts it pools."""
    fig_b = {k: median_of(base_b, k) for k in BASE_GATED}
    fig_m = {k: median_of(base_m, k) for k in BASE_GATED}
    paired = paired_errors(base_b[0].result.rows, base_m[0].result.rows, fig_b, fig_m, BASE_GATED, concurrency=c)
    blocks = independent_blocks(base_b[0].result.rows, base_m[0].result.rows, c)
    out = {}
    for name in BASE_GATED:
        pool = pooled_spread([r.figures.get(name) for r in cell] for cell in others)
        sb, sm = [r.figures[name] for r in base_b], [r.figures[name] for r in base_m]
        noise = change_error(paired.get(name), sb, sm, paired_dof=max(blocks - 1, 1), pool=pool)
        out[name] = compare(
            name,
            fig_b[name],
            fig_m[name],
            tolerance_for(name, tolerances),
            registry.metric(name).direction,
            error=noise,
            confidence=confidence,
            pass_confidence=DEFAULT_CONFIDENCE,
            requests=fewest_requests(base_b, base_m),
            min_requests=registry.metric(name).min_requests,
        )
    return out


def fewest_requests(*sides: list[Run]) -> int:
    """The fewest requests a run completed (the session's `requests` for compare)."""
    return min(run.result.completed for side in sides for run in side)


def judge(
    c: int,
    base_b: list[Run],
    base_m: list[Run],
    mtp_b: list[Run],
    mtp_m: list[Run],
    confidence: float = DEFAULT_ALARM_CONFIDENCE,
    tolerances: dict | None = None,
    others: list[list[Run]] = (),
    other_speedups: list[list[float]] = (),
) -> dict:
    """The rule's verdict on each metric, exactly as the session computes it; `others`:
    the other cells' baseline repetitions at this concurrency (the session pools their
    spread between starts), `other_speedups` their speedup tests'."""
    out = {}
    rows_b, rows_m = mtp_b[0].result.rows, mtp_m[0].result.rows
    fig_b = {k: median_of(mtp_b, k) for k in mtp_b[0].figures}
    fig_m = {k: median_of(mtp_m, k) for k in mtp_m[0].figures}
    paired = paired_errors(rows_b, rows_m, fig_b, fig_m, METRICS, concurrency=c)
    blocks = independent_blocks(rows_b, rows_m, c)
    base_paired = paired_errors(
        base_b[0].result.rows,
        base_m[0].result.rows,
        {GATED_DECODE: median_of(base_b, GATED_DECODE)},
        {GATED_DECODE: median_of(base_m, GATED_DECODE)},
        [GATED_DECODE],
        concurrency=c,
    )
    blocks = min(blocks, independent_blocks(base_b[0].result.rows, base_m[0].result.rows, c))
    speed_b, speed_m = speedups(mtp_b, base_b), speedups(mtp_m, base_m)
    sp_b, sp_m = statistics.median(speed_b), statistics.median(speed_m)
    if GATED_DECODE in paired and GATED_DECODE in base_paired:
        paired["mtp_speedup"] = ratio_error(
            sp_m,
            (paired[GATED_DECODE], fig_m[GATED_DECODE]),
            (base_paired[GATED_DECODE], median_of(base_m, GATED_DECODE)),
        )
    for name in METRICS:
        if name == "mtp_speedup":
            b, m, sb, sm = sp_b, sp_m, speed_b, speed_m
        else:
            b, m = fig_b.get(name), fig_m.get(name)
            sb = [r.figures.get(name) for r in mtp_b]
            sm = [r.figures.get(name) for r in mtp_m]
        if name == "mtp_speedup":
            pool = pooled_spread(other_speedups)
        else:
            pool = pooled_spread([r.figures.get(name) for r in cell] for cell in [base_b, *others])
        noise = change_error(paired.get(name), sb, sm, paired_dof=max(blocks - 1, 1), pool=pool)
        out[name] = compare(
            name,
            b,
            m,
            tolerance_for(name, tolerances),
            registry.metric(name).direction,
            error=noise,
            confidence=confidence,
            pass_confidence=DEFAULT_CONFIDENCE,
            requests=fewest_requests(mtp_b, mtp_m),
            min_requests=registry.metric(name).min_requests,
        )
    return out


SCENARIOS = {
    "none": dict(),
    "mtp 5% slower": dict(step_scale=1 / 0.95),
    "mtp 10% slower": dict(step_scale=1 / 0.90),
    "acceptance -0.03": dict(acceptance_drop=0.03),
}


def main(argv: list[str] | None = None) -> int:
    global CAP_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--baseline-reps", type=int, default=5)
    parser.add_argument("--measured-reps", default="auto", help="a count, or auto")
    parser.add_argument("--max-reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCIES))
    parser.add_argument(
        "--load-s",
        type=float,
        default=120.0,
        help="device seconds a server start costs (model load, compile, graph capture), paid by every "
        "repetition after the first (default 120: an assumption; nothing here measured it)",
    )
    parser.add_argument(
        "--tolerances", default="", help="overrides as the ini's llmperf_tolerances: 'steady_decode_tok_s = 3%%, ...'"
    )
    parser.add_argument(
        "--prompts",
        choices=("sharegpt", "synthetic"),
        default="sharegpt",
        help="the seed suite's ShareGPT prompts, texts and all (default), or synthetic prompt lengths "
        "(sim.calibration.synthetic_prompt_lens, no texts)",
    )
    parser.add_argument(
        "--sqrt-rule",
        dest="project",
        action="store_false",
        help="auto adds a run as if all of a verdict's noise fell with the square root of the runs "
        "(the rule before Verdict.decidable's projection), not only the measured side's spread",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="each run's time cap, in the simulated GPU's seconds (default: the nightly profile's at the run's "
        "concurrency)",
    )
    parser.add_argument(
        "--alarm-confidence",
        type=float,
        default=DEFAULT_ALARM_CONFIDENCE,
        help=f"of a claimed change, at every look (default {DEFAULT_ALARM_CONFIDENCE}: --llmperf-alarm-confidence's)",
    )
    parser.add_argument(
        "--no-confirm",
        dest="confirm",
        action="store_false",
        help="auto reports a regression read at the first look as it is (the rule before "
        "compare.wanting_another's confirmation), without reading it again",
    )
    parser.add_argument(
        "--no-pool",
        dest="pool",
        action="store_false",
        help="judge each cell on its own spread between starts (no pooling over the suite's other servers)",
    )
    args = parser.parse_args(argv)
    CAP_S = args.max_seconds  # what virtual_run caps each run at
    tolerances = parse_tolerance_overrides(args.tolerances.replace(",", "\n"))
    auto = args.measured_reps == "auto"
    first = 1 if auto else int(args.measured_reps)

    confidence = args.alarm_confidence  # a claimed change's, at every look (the session's)
    count = max(nightly_prompts(c) for c in args.concurrency) + 16
    texts: list[str] | None = None
    if args.prompts == "sharegpt":
        lens, texts = sharegpt_prompts(count)
    else:
        lens = synthetic_prompt_lens(count)
    run = functools.partial(one_run, texts=texts)
    started = time.monotonic()
    print(
        f"verdict power: {args.trials} trials per concurrency, baseline {args.baseline_reps} rep(s), "
        f"measured {args.measured_reps} rep(s) (max {args.max_reps}); nightly workload ({args.prompts} prompts, "
        f"caps {', '.join(f'{cap_s(c):g} s at {c}' for c in args.concurrency)}), "
        f"{MODEL}; auto adds runs by {'the square-root rule' if not args.project else 'the noise they can take off'}"
        f"{', and reads a first look regressed again' if args.confirm else ', and reports a first look regressed'}; "
        f"step noise {STEP_NOISE}, acceptance noise {ACCEPTANCE_NOISE:.0%}"
    )
    header = f"{'conc':>4}  {'metric':<18} {'false alarm':>11} {'inconcl.':>8} | " + " | ".join(
        f"{s:>16}" for s in SCENARIOS if s != "none"
    )
    print(header)
    print(" " * 44 + "detected / inconclusive in each")
    device_fixed = 0.0
    # Per concurrency, each trial's device seconds of the nightly verdict with no change.
    device_trials: dict[int, list[float]] = {c: [] for c in args.concurrency}
    # ... and how many server starts its added repetitions made (each a model load).
    start_trials: dict[int, list[int]] = {c: [] for c in args.concurrency}
    device_added: dict[int, float] = dict.fromkeys(args.concurrency, 0.0)  # added runs' share, per concurrency
    reps_used: dict[int, list[int]] = {c: [] for c in args.concurrency}
    added_for: dict[int, collections.Counter] = {c: collections.Counter() for c in args.concurrency}
    base_reps: dict[int, list[int]] = {c: [] for c in args.concurrency}
    base_counts: dict[int, dict[str, int]] = {c: {} for c in args.concurrency}
    base_alarms: dict[int, dict[str, int]] = {c: dict.fromkeys(BASE_GATED, 0) for c in args.concurrency}
    # MTP tests with a gated metric regressed at the first look, by scenario: how they ended.
    read_again = {c: {s: collections.Counter() for s in SCENARIOS} for c in args.concurrency}
    for c in args.concurrency:
        counts: dict[str, dict[str, dict[str, int]]] = {s: {m: {} for m in METRICS} for s in SCENARIOS}
        rate0 = run(c, True, lens, random.Random(0)).figures["acceptance_rate"]
        for trial in range(args.trials):
            # Each trial, and each scenario's measured runs, draw from their own seed: a rule
            # that adds a run changes only the trials where it does (--no-confirm against the default).
            rng = random.Random(f"{args.seed}:{c}:{trial}")
            base_b = [run(c, False, lens, rng) for _ in range(args.baseline_reps)]
            mtp_b = [run(c, True, lens, rng) for _ in range(args.baseline_reps)]
            # The seed suite's other model (35B base and MTP) at this concurrency: stand-ins of
            # the same profiles with their own starts, whose recorded spread the session pools.
            other_base = [run(c, False, lens, rng) for _ in range(args.baseline_reps)]
            other_mtp = [run(c, True, lens, rng) for _ in range(args.baseline_reps)]
            others = [other_base, other_mtp] if args.pool else []
            other_speedups = (
                [[m.figures[GATED_DECODE] / b.figures[GATED_DECODE] for m, b in zip(other_mtp, other_base)]]
                if args.pool
                else []
            )
            pooled = {"others": others, "other_speedups": other_speedups}
            # The base server's own test runs first, with its own auto repetitions.
            base_m = [run(c, False, lens, rng) for _ in range(first)]
            base_cells = [mtp_b, *others] if args.pool else [mtp_b]
            base_verdicts = judge_base(c, base_b, base_m, confidence, tolerances, base_cells)
            while auto and (
                asking := worth_another(
                    len(base_m),
                    args.max_reps,
                    base_verdicts,
                    gated=BASE_GATED,
                    project=args.project,
                    first_look=len(base_m) == first,
                    confirm=args.confirm,
                )
            ):
                added_for[c].update(f"base {name}" for name in asking)
                base_m.append(run(c, False, lens, rng))
                base_verdicts = judge_base(c, base_b, base_m, confidence, tolerances, base_cells)
            base_reps[c].append(len(base_m))
            for name in BASE_GATED:
                base_counts[c][base_verdicts[name].status] = base_counts[c].get(base_verdicts[name].status, 0) + 1
                base_alarms[c][name] += base_verdicts[name].status == "regressed"
            # two models; each repetition after the first a fresh server start: a model load
            device = (sum(r.result.duration for r in base_m) + (len(base_m) - 1) * args.load_s) * 2
            starts = (len(base_m) - 1) * 2
            device_added[c] += (sum(r.result.duration for r in base_m[1:]) + (len(base_m) - 1) * args.load_s) * 2
            for scenario, change in SCENARIOS.items():
                drop = change.get("acceptance_drop")
                kw = {
                    "step_scale": change.get("step_scale", 1.0),
                    "acceptance_scale": 1.0 - drop / rate0 if drop else 1.0,
                }
                measured_rng = random.Random(f"{args.seed}:{c}:{trial}:{scenario}")
                mtp_m = [run(c, True, lens, measured_rng, **kw) for _ in range(first)]
                verdicts = judge(c, base_b, base_m, mtp_b, mtp_m, confidence, tolerances, **pooled)
                regressed_first = [name for name in GATED if verdicts[name].status == "regressed"]
                while auto and (
                    asking := worth_another(
                        len(mtp_m),
                        args.max_reps,
                        verdicts,
                        project=args.project,
                        first_look=len(mtp_m) == first,
                        confirm=args.confirm,
                    )
                ):
                    if scenario == "none":
                        added_for[c].update(f"mtp {name}" for name in asking)
                    mtp_m.append(run(c, True, lens, measured_rng, **kw))
                    verdicts = judge(c, base_b, base_m, mtp_b, mtp_m, confidence, tolerances, **pooled)
                if auto and regressed_first:
                    ended = "regressed" if any(verdicts[n].status == "regressed" for n in GATED) else "not"
                    read_again[c][scenario][ended] += 1
                # The seed suite's speedup test judges the MTP server's runs as they stand and
                # adds its own, its first look's regression read again too; the MTP test's
                # verdicts are the ones it reported.
                reported = dict(verdicts)
                speed_look = True
                while auto and (
                    asking := worth_another(
                        len(mtp_m),
                        args.max_reps,
                        verdicts,
                        gated=("mtp_speedup",),
                        project=args.project,
                        first_look=speed_look,
                        confirm=args.confirm,
                    )
                ):
                    if scenario == "none":
                        added_for[c].update(f"speedup test {name}" for name in asking)
                    mtp_m.append(run(c, True, lens, measured_rng, **kw))
                    verdicts = judge(c, base_b, base_m, mtp_b, mtp_m, confidence, tolerances, **pooled)
                    speed_look = False
                verdicts = {**reported, "mtp_speedup": verdicts["mtp_speedup"]}
                if scenario == "none":
                    # each repetition after the first is a fresh server start: a model load
                    device += (sum(r.result.duration for r in mtp_m) + (len(mtp_m) - 1) * args.load_s) * 2
                    device_trials[c].append(device)
                    start_trials[c].append(starts + (len(mtp_m) - 1) * 2)
                    device_added[c] += (sum(r.result.duration for r in mtp_m[1:]) + (len(mtp_m) - 1) * args.load_s) * 2
                    reps_used[c].append(len(mtp_m))
                for name, verdict in verdicts.items():
                    bucket = counts[scenario][name]
                    bucket[verdict.status] = bucket.get(verdict.status, 0) + 1
        n = args.trials
        for metric in METRICS:
            none = counts["none"][metric]
            cells = []
            for scenario in SCENARIOS:
                if scenario == "none":
                    continue
                got = counts[scenario][metric]
                cells.append(
                    f"{100 * got.get('regressed', 0) / n:6.1f}% / {100 * got.get('inconclusive', 0) / n:5.1f}%"
                )
            print(
                f"{c:>4}  {metric:<18} {100 * none.get('regressed', 0) / n:10.1f}% "
                f"{100 * none.get('inconclusive', 0) / n:7.1f}% | " + " | ".join(f"{x:>16}" for x in cells)
            )
        device_fixed += 4 * SEED_FIXED_S[c]
        shares = ", ".join(
            f"{o} {100 * base_counts[c].get(o, 0) / (n * len(BASE_GATED)):.1f}%"
            for o in ("regressed", "inconclusive", "pass")
        )
        alarms = ", ".join(f"{name} {100 * k / n:.1f}%" for name, k in base_alarms[c].items())
        print(f"{c:>4}  base test ({', '.join(BASE_GATED)}), unchanged, per metric: {shares} (regressed: {alarms})")
        print(
            f"{c:>4}  measured repetitions with no change: MTP mean {statistics.mean(reps_used[c]):.2f}, "
            f"max {max(reps_used[c])}; base mean {statistics.mean(base_reps[c]):.2f}, max {max(base_reps[c])}"
        )
        asked = ", ".join(f"{name} {k}" for name, k in added_for[c].most_common()) or "none"
        print(f"{c:>4}  added runs with no change, per metric that asked for one: {asked}")
        if auto:
            ends = ", ".join(
                f"{scenario} {sum(got.values())} ({got['regressed']} regressed)"
                for scenario, got in read_again[c].items()
            )
            print(f"{c:>4}  MTP tests regressed at the first look (a gated metric), and how many ended so: {ends}")
    # Trials at different concurrencies are independent: the means add, and so do their variances.
    device_nightly = sum(statistics.mean(t) for t in device_trials.values())
    device_se = math.sqrt(sum(statistics.variance(t) / len(t) for t in device_trials.values() if len(t) > 1))
    print(
        f"device time of one nightly verdict of the seed suite (4 servers, measured runs with no change, "
        f"each server's own auto repetitions; "
        f"the restarts of added repetitions at {args.load_s:g} s each counted; warm-up, the first model "
        f"load and recording not): {device_nightly / 60:.1f} GPU-min (standard error {device_se / 60:.2f}), against "
        f"{device_fixed / 60:.1f} GPU-min for the seeds' fixed runs ({device_nightly / device_fixed:.1%})"
    )
    added = ", ".join(f"{c}: {device_added[c] / args.trials / 60:.1f}" for c in args.concurrency)
    print(f"of which the added repetitions (their runs and model loads), GPU-min by concurrency: {added}")
    # The model load is an assumption (--load-s): the time is runs + starts x load, so say
    # how many starts there were and at which load auto would cost half the fixed runs.
    starts = sum(statistics.mean(t) for t in start_trials.values())
    runs_s = device_nightly - starts * args.load_s
    even = (device_fixed / 2 - runs_s) / starts if starts else float("nan")
    print(
        f"server starts added per nightly verdict: {starts:.2f}; runs alone {runs_s / 60:.1f} GPU-min; "
        f"auto costs half the fixed runs with a start of {even:.0f} s or less"
    )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
