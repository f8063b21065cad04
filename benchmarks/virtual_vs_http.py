"""Do the virtual clock's figures hold over real HTTP? The same runs both ways.

    python benchmarks/virtual_vs_http.py                      # nightly workload, c = 1, 8, 32
    python benchmarks/virtual_vs_http.py --concurrency 8 --scale 1.05

benchmarks/nights.py and paired_power.py judge thousands of runs made on the
simulator's virtual clock (sim/virtual.py: the engine stepped without a server, a client
or a clock). They say something about the plugin only if a run over HTTP, with the
plugin's own client, sampler and metrics, measures the same figures on the same prompts.
This makes each run both ways: the simulated server started as the plugin starts it
(`python -m pytest_llmperf.sim`, at `--speed` x real time), the nightly profile's prompts
sampled from the seed suite's ShareGPT file with the server's own token counts, sent by
the plugin's runner without warm-up, summarised by metrics/summary.py; then
`run_virtual` on the very same prompt texts and lengths, concurrency, max_tokens and
time cap. Prints, per server and concurrency, the gated figures both ways and their
difference, and per run the figures' paired request-level noise (metrics/uncertainty.py,
the verdict rule's) over the virtual run's own rows, for scale. Measures; judges nothing.

Needs a quiet machine: the HTTP side runs in real time (a loaded one reads its lag as
slower steps).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.metrics.registry import GATED_DECODE  # noqa: E402
from pytest_llmperf.metrics.steady import steady_tok_s  # noqa: E402
from pytest_llmperf.sim.calibration import MTP3  # noqa: E402
from pytest_llmperf.sim.config import SimConfig  # noqa: E402
from pytest_llmperf.sim.server import simulated_process  # noqa: E402
from pytest_llmperf.sim.virtual import run_virtual  # noqa: E402
from pytest_llmperf.workload.config import RunConfig  # noqa: E402
from pytest_llmperf.workload.dataset import find_dataset, load_sharegpt, sample_requests  # noqa: E402
from pytest_llmperf.workload.runner import run_benchmark  # noqa: E402
from pytest_llmperf.workload.token_counts import ServerTokenCounter  # noqa: E402
from pytest_llmperf.workload.workload import PROFILE_SCALE, profile_scale  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODEL = "Qwen/Qwen3.6-27B-FP8"
MAX_TOKENS = 256
FIGURES = (GATED_DECODE, "tpot_ms_median", "ttft_ms_median", "acceptance_rate", "completed")


def virtual_figures(config: SimConfig, requests, c: int, prompts: int, cap: float) -> dict[str, float | None]:
    r = run_virtual(
        config,
        [q.prompt_len for q in requests],
        c,
        MAX_TOKENS,
        num_prompts=prompts,
        max_seconds=cap,
        prompts=[q.prompt for q in requests],
    )
    return {
        GATED_DECODE: steady_tok_s(r.spans, c),
        "tpot_ms_median": r.tpot_median * 1000.0,
        "ttft_ms_median": r.ttft_median * 1000.0,
        "acceptance_rate": r.accepted / r.draft_tokens if r.draft_tokens else None,
        "completed": float(r.completed),
    }


def http_figures(url: str, requests, c: int, prompts: int, cap: float, speed: float) -> dict[str, float | None]:
    config = RunConfig(
        concurrency=c,
        num_prompts=prompts,
        max_seconds=cap / speed,
        max_tokens=MAX_TOKENS,
        warmup_requests=0,
        progress=False,
    )
    result = run_benchmark(url, MODEL, requests, config, clock_speed=speed)
    summary = result.summary().to_dict()
    spec = result.spec_decode().to_dict()
    return {
        GATED_DECODE: summary.get(GATED_DECODE),
        "tpot_ms_median": summary.get("tpot_ms_median"),
        "ttft_ms_median": summary.get("ttft_ms_median"),
        "acceptance_rate": spec.get("acceptance_rate"),
        "completed": float(summary.get("completed") or 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--speed", type=float, default=10.0, help="the simulator's clock speed-up (the plugin's: 10)")
    parser.add_argument("--scale", type=float, default=1.0, help="--sim-step-time-scale of both servers")
    parser.add_argument("--profile", default="nightly", choices=sorted(PROFILE_SCALE))
    parser.add_argument("--servers", nargs="+", default=["base", "MTP"], choices=["base", "MTP"])
    args = parser.parse_args(argv)
    conversations = load_sharegpt(find_dataset(None, ROOT))
    started = time.monotonic()
    print(
        f"virtual clock vs HTTP: {MODEL} base and MTP (k=3), {args.profile} workload, max_tokens {MAX_TOKENS}, "
        f"server at x{args.speed:g}, step scale {args.scale:g}"
    )
    print(f"{'server':<5} {'conc':>4}  {'figure':<20} {'virtual':>10} {'HTTP':>10} {'diff':>8}")
    worst: dict[str, float] = {}
    for speculative in [name == "MTP" for name in args.servers]:
        config = SimConfig(
            model=MODEL,
            max_num_seqs=32,
            max_model_len=65536,
            speculative_config=dict(MTP3) if speculative else None,
            step_time_scale=args.scale,
        )
        name = "MTP" if speculative else "base"
        for c in args.concurrency:
            per_stream, least, cap = profile_scale(args.profile, c)
            prompts = max(per_stream * c, least)
            # A fresh server per run: a run starts on an idle engine both ways.
            served = dataclasses.replace(config, speed=args.speed)
            with simulated_process(served) as sim:
                counter = ServerTokenCounter(sim.url, MODEL, cache_dir=None)
                requests = sample_requests(conversations, prompts, seed=0, count_tokens=counter)
                over_http = http_figures(sim.url, requests, c, prompts, cap, args.speed)
            virtual = virtual_figures(config, requests, c, prompts, cap)
            for figure in FIGURES:
                v, h = virtual[figure], over_http[figure]
                if v is None or h is None:
                    print(f"{name:<5} {c:>4}  {figure:<20} {'-':>10} {'-':>10}")
                    continue
                diff = (h - v) / v if v else 0.0
                worst[figure] = max(worst.get(figure, 0.0), abs(diff))
                print(f"{name:<5} {c:>4}  {figure:<20} {v:>10.4g} {h:>10.4g} {100 * diff:>+7.2f}%")
    print("largest difference: " + ", ".join(f"{k} {100 * v:.2f}%" for k, v in worst.items()))
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
