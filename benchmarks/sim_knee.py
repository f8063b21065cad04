"""The simulator's knee: TTFT and TPOT against concurrency, on the virtual clock.

For each seed server (Qwen3.6 35B-A3B and 27B, base and MTP k=3, with the seed suite's
flags `--max-model-len 65536 --max-num-seqs 32`), closed-loop clients at each concurrency
(1, 2, 4, ... 128) send ShareGPT-length prompts with max_tokens 256 (the seeds' workload)
to the simulator's own engine on its virtual clock (sim/virtual.run_virtual: the engine
that serves HTTP, stepped without sleeping). Prints, per concurrency, the steady decode
tok/s (the plugin's steady window), TTFT and TPOT median and p99 (numpy's linear
percentiles, as the plugin's summary), and the knee: the first concurrency whose TTFT p99
is more than twice its value at concurrency 1.

    python benchmarks/sim_knee.py                                         # the default server
    python benchmarks/sim_knee.py --sim-args "--sim-prefill-budget 512"   # default against a knob
    python benchmarks/sim_knee.py --only 27B --concurrencies 1,8,32

With --sim-args each cell reads `default -> with the flags (ratio)`. Deterministic: the
same arguments print the same table. A run takes seconds per server.
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass

import numpy as np

from pytest_llmperf.metrics.steady import steady_tok_s
from pytest_llmperf.sim.calibration import A3B, D27, MTP3, synthetic_prompt_lens
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.virtual import run_virtual

SERVERS = ((A3B, False), (A3B, True), (D27, False), (D27, True))
CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_TOKENS = 256
KNEE_FACTOR = 2.0


@dataclass(frozen=True)
class Point:
    """One run's figures: steady decode tok/s, TTFT and TPOT median and p99 (ms)."""

    decode_tok_s: float
    ttft_p50: float
    ttft_p99: float
    tpot_p50: float
    tpot_p99: float


def server_argv(model: str, mtp: bool, max_num_seqs: int, sim_args: list[str]) -> list[str]:
    """The seed server's `vllm serve` arguments (conftest.py's), then the simulator flags."""
    argv = [model, "--max-model-len", "65536", "--max-num-seqs", str(max_num_seqs)]
    if mtp:
        argv += ["--speculative-config", json.dumps(MTP3)]
    return argv + sim_args


def measure(config: SimConfig, concurrency: int, prompts_per_stream: int) -> Point:
    """A closed-loop run at `concurrency`: `prompts_per_stream` prompts a stream, 200 at least."""
    n = max(200, prompts_per_stream * concurrency)
    r = run_virtual(config, synthetic_prompt_lens(n), concurrency, MAX_TOKENS, num_prompts=n)
    ttft = np.asarray(r.ttfts) * 1000.0
    tpot = np.asarray(r.tpots) * 1000.0
    return Point(
        decode_tok_s=steady_tok_s(r.spans, concurrency) or r.decode_tok_s,
        ttft_p50=float(np.percentile(ttft, 50)),
        ttft_p99=float(np.percentile(ttft, 99)),
        tpot_p50=float(np.percentile(tpot, 50)),
        tpot_p99=float(np.percentile(tpot, 99)),
    )


def knee(points: dict[int, Point]) -> str:
    """The first concurrency whose TTFT p99 is over KNEE_FACTOR times the lowest one's."""
    first = points[min(points)].ttft_p99
    for c in sorted(points):
        if points[c].ttft_p99 > KNEE_FACTOR * first:
            return str(c)
    return f"none up to {max(points)}"


def cell(old: Point, new: Point | None, name: str, digits: int) -> str:
    a = getattr(old, name)
    if new is None:
        return f"{a:,.{digits}f}"
    b = getattr(new, name)
    return f"{a:,.{digits}f} -> {b:,.{digits}f} ({b / a:.3f})"


COLUMNS = (
    ("decode tok/s", "decode_tok_s", 2),
    ("TTFT p50 ms", "ttft_p50", 0),
    ("TTFT p99 ms", "ttft_p99", 0),
    ("TPOT p50 ms", "tpot_p50", 1),
    ("TPOT p99 ms", "tpot_p99", 1),
)


def table(label: str, old: dict[int, Point], new: dict[int, Point] | None) -> list[str]:
    lines = [f"### {label}", "", "| conc | " + " | ".join(h for h, _, _ in COLUMNS) + " |"]
    lines.append("|---:|" + "---:|" * len(COLUMNS))
    for c in sorted(old):
        cells = [cell(old[c], new[c] if new else None, name, d) for _, name, d in COLUMNS]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += ["", f"knee (TTFT p99 over {KNEE_FACTOR:g}x concurrency {min(old)}'s): {knee(old)}"]
    if new is not None:
        lines[-1] += f" -> {knee(new)}"
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim-args", default="", help="simulator flags to compare with the default server")
    ap.add_argument("--max-num-seqs", type=int, default=32, help="the servers' --max-num-seqs (seed suite: 32)")
    ap.add_argument("--concurrencies", default=",".join(map(str, CONCURRENCIES)))
    ap.add_argument("--prompts-per-stream", type=int, default=8, help="prompts a stream sends (200 a run at least)")
    ap.add_argument("--only", default="", help="servers whose label contains this (e.g. 27B, MTP)")
    args = ap.parse_args(argv)
    sim_args = shlex.split(args.sim_args)
    concurrencies = [int(c) for c in args.concurrencies.split(",")]
    print(f"closed loop, ShareGPT-length prompts, max_tokens {MAX_TOKENS}, --max-num-seqs {args.max_num_seqs}")
    if sim_args:
        print(f"cells: default -> {shlex.join(sim_args)} (ratio)")
    print()
    for model, mtp in SERVERS:
        label = f"{model.split('/')[-1]} {'MTP k=3' if mtp else 'base'}"
        if args.only not in label:
            continue
        default = SimConfig.from_vllm_argv(server_argv(model, mtp, args.max_num_seqs, []))
        old = {c: measure(default, c, args.prompts_per_stream) for c in concurrencies}
        new = None
        if sim_args:
            knob = SimConfig.from_vllm_argv(server_argv(model, mtp, args.max_num_seqs, sim_args))
            new = {c: measure(knob, c, args.prompts_per_stream) for c in concurrencies}
        print("\n".join(table(label, old, new)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
