"""Do the power tables hold over real HTTP? Gated comparisons judged from runs made both ways.

    python benchmarks/power_over_http.py                        # c = 32, 24 + 24 + 12 runs a way
    python benchmarks/power_over_http.py --runs 11 --trials 20   # a quicker look (about 9 min)
    python benchmarks/power_over_http.py --virtual-only [--synthetic] [--slower-runs 120]

benchmarks/verdict_power.py judges thousands of runs made on the simulator's virtual
clock. This judges gated comparisons whose runs went over HTTP: the simulated server
started as the plugin starts it (`python -m pytest_llmperf.sim`, at `--speed` x real
time; a fresh start per run, with the power tables' noise between starts drawn by the
server itself: `--sim-run-noise`, `--sim-acceptance-noise`), the nightly profile's
prompts from the seed suite's ShareGPT file with the server's token counts, the plugin's
runner and metrics (no warm-up: a run starts on an idle engine both ways). The same runs
are made on the virtual clock with the same prompts and the same noise draws (each start
i seeds its draw), so every comparison is judged twice, once from each pool.

Pools at one concurrency: `--runs` starts of the Qwen3.6-27B base server and of its MTP
server, unchanged, and `--runs / 2` of the MTP server with its steps x 1/0.95 (decode 5 %
slower). A trial draws from them without replacement, as verdict_power.py's trial makes
them: five base and five MTP starts as the recorded baselines, five of each as the seed
suite's other model (whose spread the session pools), then the measured runs, one and
more while auto asks (the base test's first, then the MTP test's), from the unchanged
MTP pool (no change) or the slower one (5 % slower). Judged by verdict_power.py's
`judge` and `worth_another`: the session's rule. Prints per metric of the MTP test the
share of trials regressed / inconclusive, with no change and 5 % slower, virtual beside
HTTP, and the figures' largest difference between the two ways of the same start.

The trials share their runs (a pool of 24 starts gives many trials, not independent
ones): the rates confirm that the virtual and HTTP pools judge alike, they are not a
second measurement of the tables' rates to their own precision. Needs a quiet machine:
the HTTP side runs in real time (a loaded one reads its lag as slower steps).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from verdict_power import (  # noqa: E402
    ACCEPTANCE_NOISE,
    BASE_GATED,
    GATED,
    MAX_TOKENS,
    METRICS,
    MODEL,
    STEP_NOISE,
    Run,
    cap_s,
    judge,
    judge_base,
    nightly_prompts,
    virtual_run,
    worth_another,
)

from pytest_llmperf.baselines.compare import DEFAULT_ALARM_CONFIDENCE  # noqa: E402
from pytest_llmperf.metrics.registry import GATED_DECODE  # noqa: E402
from pytest_llmperf.metrics.uncertainty import request_rows  # noqa: E402
from pytest_llmperf.sim.calibration import MTP3, synthetic_prompt_lens  # noqa: E402
from pytest_llmperf.sim.config import SimConfig  # noqa: E402
from pytest_llmperf.sim.server import simulated_process  # noqa: E402
from pytest_llmperf.workload.config import GRACE_SECONDS, RunConfig  # noqa: E402
from pytest_llmperf.workload.dataset import find_dataset, load_sharegpt, sample_requests  # noqa: E402
from pytest_llmperf.workload.runner import run_benchmark  # noqa: E402
from pytest_llmperf.workload.token_counts import ServerTokenCounter  # noqa: E402

ROOT = HERE.parent
POOLS = ("base", "MTP", "MTP 5% slower")


@dataclass
class Synthetic:
    """A prompt known by its length alone (verdict_power.py's workload)."""

    prompt_len: int
    prompt: str = ""


@dataclass
class HttpResult:
    """What verdict_power's judge reads of a run: its request rows, completed requests and
    duration (on the server's clock, as the summary gives it)."""

    rows: list
    completed: int
    duration: float


def config_for(pool: str, i: int, c: int) -> SimConfig:
    speculative = pool != "base"
    return SimConfig(
        model=MODEL,
        max_num_seqs=32,
        max_model_len=65536,
        speculative_config=dict(MTP3) if speculative else None,
        step_time_scale=1 / 0.95 if pool == "MTP 5% slower" else 1.0,
        run_noise=STEP_NOISE[c],
        acceptance_noise=ACCEPTANCE_NOISE if speculative else 0.0,
        noise_seed=1_000_003 * POOLS.index(pool) + i,  # start i's draw, the same both ways
    )


def pool_run(config: SimConfig, requests, c: int) -> Run:
    """verdict_power.py's virtual run of these prompts (their texts, where they have them)."""
    texts = [q.prompt for q in requests] if requests[0].prompt else None
    return virtual_run(config, [q.prompt_len for q in requests], c, texts)


def http_run(config: SimConfig, requests, c: int, speed: float) -> Run:
    run_config = RunConfig(
        concurrency=c,
        num_prompts=nightly_prompts(c),
        max_seconds=cap_s(c) / speed,
        grace_seconds=GRACE_SECONDS / speed,  # the GPU's 30 s, as the virtual run cuts
        max_tokens=MAX_TOKENS,
        warmup_requests=0,
        progress=False,
    )
    with simulated_process(dataclasses.replace(config, speed=speed)) as sim:
        result = run_benchmark(sim.url, MODEL, requests, run_config, clock_speed=speed)
    summary = result.summary().to_dict()
    figures = {
        name: float(summary[name])
        for name in ("decode_tok_s", GATED_DECODE, "tpot_ms_median", "ttft_ms_median")
        if summary.get(name) is not None
    }
    spec = result.spec_decode().to_dict()
    for name in ("acceptance_length", "acceptance_rate"):
        if spec.get(name) is not None:
            figures[name] = float(spec[name])
    rows = request_rows(result.records, speed)
    completed = int(summary.get("completed") or 0)
    return Run(HttpResult(rows, completed, float(summary.get("duration_s") or 0.0)), figures)


def trial(c: int, pools: dict[str, list[Run]], order: dict[str, list[int]], slower: bool) -> dict:
    """One gated comparison from `pools` (by the trial's draw `order`): the MTP test's verdicts."""
    confidence = DEFAULT_ALARM_CONFIDENCE
    base = [pools["base"][i] for i in order["base"]]
    mtp = [pools["MTP"][i] for i in order["MTP"]]
    base_b, other_base, base_rest = base[:5], base[5:10], base[10:]
    mtp_b, other_mtp, mtp_rest = mtp[:5], mtp[5:10], mtp[10:]
    if slower:
        mtp_rest = [pools["MTP 5% slower"][i] for i in order["MTP 5% slower"]]
    others = [other_base, other_mtp]
    other_speedups = [[m.figures[GATED_DECODE] / b.figures[GATED_DECODE] for m, b in zip(other_mtp, other_base)]]
    base_m = base_rest[:1]
    verdicts = judge_base(c, base_b, base_m, confidence, None, [mtp_b, *others])
    while worth_another(len(base_m), min(5, len(base_rest)), verdicts, gated=BASE_GATED):
        base_m = base_rest[: len(base_m) + 1]
        verdicts = judge_base(c, base_b, base_m, confidence, None, [mtp_b, *others])
    mtp_m = mtp_rest[:1]
    pooled = {"others": others, "other_speedups": other_speedups}
    verdicts = judge(c, base_b, base_m, mtp_b, mtp_m, confidence, None, **pooled)
    while worth_another(len(mtp_m), min(5, len(mtp_rest)), verdicts):
        mtp_m = mtp_rest[: len(mtp_m) + 1]
        verdicts = judge(c, base_b, base_m, mtp_b, mtp_m, confidence, None, **pooled)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32, choices=sorted(STEP_NOISE))
    parser.add_argument("--runs", type=int, default=24, help="starts of each unchanged server (half as many slower)")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--speed", type=float, default=10.0, help="the simulator's clock speed-up (the plugin's: 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slower-runs", type=int, default=None, help="starts of the slower MTP server (--runs / 2)")
    parser.add_argument(
        "--virtual-only", action="store_true", help="the virtual pools alone (seconds, not half an hour)"
    )
    parser.add_argument(
        "--synthetic",
        action="store_true",
        help="with --virtual-only: verdict_power.py's synthetic prompt lengths, no texts, instead of ShareGPT's",
    )
    args = parser.parse_args(argv)
    c = args.concurrency
    if args.runs < 11:
        parser.error("--runs: at least 11 (five starts recorded, five as the other model, one measured)")
    if args.synthetic and not args.virtual_only:
        parser.error("--synthetic: only with --virtual-only (an HTTP run sends texts)")
    sizes = {"base": args.runs, "MTP": args.runs, "MTP 5% slower": args.slower_runs or max(args.runs // 2, 1)}
    ways = ("virtual",) if args.virtual_only else ("virtual", "HTTP")
    started = time.monotonic()
    print(
        f"power over HTTP: {MODEL} base and MTP (k=3), nightly workload at concurrency {c}, server at "
        f"x{args.speed:g}; pools of {sizes['base']} + {sizes['MTP']} + {sizes['MTP 5% slower']} starts a way "
        f"(noise between starts: step {STEP_NOISE[c]:.0%}, acceptance {ACCEPTANCE_NOISE:.0%}); {args.trials} trials"
    )
    if args.synthetic:
        requests = [Synthetic(n) for n in synthetic_prompt_lens(nightly_prompts(c) + 16)]
    else:
        conversations = load_sharegpt(find_dataset(None, ROOT))
        with simulated_process(dataclasses.replace(config_for("base", 0, c), speed=args.speed)) as sim:
            counter = ServerTokenCounter(sim.url, MODEL, cache_dir=None)
            requests = sample_requests(conversations, nightly_prompts(c), seed=0, count_tokens=counter)
    pools: dict[str, dict[str, list[Run]]] = {way: {} for way in ways}
    worst: dict[str, float] = {}
    for pool, n in sizes.items():
        for way in ways:
            pools[way][pool] = []
        for i in range(n):
            config = config_for(pool, i, c)
            v = pool_run(config, requests, c)
            pools["virtual"][pool].append(v)
            if args.virtual_only:
                continue
            h = http_run(config, requests, c, args.speed)
            pools["HTTP"][pool].append(h)
            for name, value in v.figures.items():
                if value and name in h.figures:
                    worst[name] = max(worst.get(name, 0.0), abs(h.figures[name] - value) / abs(value))
        print(f"  {pool}: {n} starts {' and '.join(ways)} ({time.monotonic() - started:.0f} s)", flush=True)
    if worst:
        print(
            "largest difference of a start's figures, HTTP against virtual: "
            + ", ".join(f"{k} {100 * v:.2f}%" for k, v in worst.items())
        )
    rng = random.Random(args.seed)
    counts = {way: {s: {m: {} for m in METRICS} for s in ("none", "slower")} for way in pools}
    for _ in range(args.trials):
        order = {pool: rng.sample(range(n), n) for pool, n in sizes.items()}
        for way in pools:
            for scenario in ("none", "slower"):
                verdicts = trial(c, pools[way], order, scenario == "slower")
                for name, verdict in verdicts.items():
                    bucket = counts[way][scenario][name]
                    bucket[verdict.status] = bucket.get(verdict.status, 0) + 1
    n = args.trials
    print(f"{'metric':<20} {'':>8} {'no change: regressed / inconcl.':>32} {'5% slower: regressed / inconcl.':>32}")
    for name in GATED + ("mtp_speedup",):
        for way in pools:
            cells = []
            for scenario in ("none", "slower"):
                got = counts[way][scenario][name]
                cells.append(
                    f"{100 * got.get('regressed', 0) / n:6.1f}% / {100 * got.get('inconclusive', 0) / n:5.1f}%"
                )
            print(f"{name:<20} {way:>8} {cells[0]:>32} {cells[1]:>32}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
