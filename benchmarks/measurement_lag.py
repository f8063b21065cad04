"""How far behind do the measuring client and the simulator run? Prints, per concurrency,
the two figures a run is judged invalid on (docs/verdicts.md): the simulator's engine lag
(how late its steps end, as a share of step time; invalid above 0.5) and the client's
event-loop lag (its mean lateness as a share of the run's median gap between chunks;
invalid above 0.5), with the client's lag in milliseconds.

The server is the simulated Qwen3.6-35B-A3B (the seed suite's) at the plugin's default
clock speed, x10, in its own process; the prompts are fixed, 128 output tokens each.

    python benchmarks/measurement_lag.py --concurrency 1 8 32 --prompts 64 [--busy-core]

`--busy-core` keeps one core busy with a spinning process for the whole time, as
benchmarks/repeat_main_command.py does. Figures are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics

from pytest_llmperf import ServerSpec
from pytest_llmperf.servers.sim_target import SimTarget
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.runner import RunConfig, run_benchmark

SPEC = ServerSpec(name="qwen3.6-35b-a3b-fp8", model="Qwen/Qwen3.6-35B-A3B-FP8", args=("--max-num-seqs", "32"))


def _spin() -> None:  # pragma: no cover - runs in a child process
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--busy-core", action="store_true")
    args = parser.parse_args()
    spinner = multiprocessing.Process(target=_spin, daemon=True) if args.busy_core else None
    if spinner is not None:
        spinner.start()
    requests = [SampledRequest(i, f"prompt {i}: " + "hello world " * 50, 100, 128) for i in range(args.prompts)]
    print(f"simulator x{args.speed:g}{', one core busy' if spinner else ''}; {args.prompts} prompts of 128 tokens")
    print("conc  engine lag  client lag  client lag ms (mean / p99 / max)  median gap ms")
    try:
        with SimTarget(speed=args.speed).start(SPEC) as endpoint:
            for concurrency in args.concurrency:
                config = RunConfig(concurrency=concurrency, max_tokens=128, warmup_requests=concurrency, progress=False)
                result = run_benchmark(endpoint.base_url, endpoint.model, requests, config)
                gap = statistics.median(g for r in result.records if r.ok for g in r.itls)
                lag = result.client_lag or {}
                engine, client = result.engine_lag(), result.client_lag_share()
                print(
                    f"{concurrency:>4}  {engine:>10.3f}  {client:>10.4f}  "
                    f"{lag['mean_s'] * 1000:>12.3f} / {lag['p99_s'] * 1000:.3f} / {lag['max_s'] * 1000:.3f}"
                    f"  {gap * 1000:>13.2f}"
                )
    finally:
        if spinner is not None:
            spinner.terminate()


if __name__ == "__main__":
    main()
