"""Whole-run against steady-state decode throughput under a uniform slowdown.

    python benchmarks/steady_window.py
    python benchmarks/steady_window.py --scale 1.05 --profile smoke

Every step of both the base and the MTP server made `--scale` times slower (the
simulator's --sim-step-time-scale), on the simulator's virtual clock with the seed
suite's Qwen3.6-27B profiles and a profile's workload (prompts and time cap per
concurrency, max_tokens 256, synthetic ShareGPT-like prompt lengths). A faithful decode
figure reads 1/scale - 1 on both servers and leaves the MTP speedup where it was; the
whole-run figure (tokens / duration) is moved by the capped run's ramp-down tail.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.metrics.steady import steady_tok_s  # noqa: E402
from pytest_llmperf.sim.calibration import MTP3, synthetic_prompt_lens  # noqa: E402
from pytest_llmperf.sim.config import SimConfig  # noqa: E402
from pytest_llmperf.sim.virtual import run_virtual  # noqa: E402
from pytest_llmperf.workload.workload import PROFILE_SCALE, profile_scale  # noqa: E402

MODEL = "Qwen/Qwen3.6-27B-FP8"


def figures(c: int, prompts: int, cap: float, scale: float, speculative: bool) -> tuple[float, float]:
    cfg = SimConfig(
        model=MODEL,
        max_num_seqs=32,
        max_model_len=65536,
        speculative_config=dict(MTP3) if speculative else None,
        step_time_scale=scale,
    )
    r = run_virtual(cfg, synthetic_prompt_lens(prompts + 16), c, 256, num_prompts=prompts, max_seconds=cap)
    return r.decode_tok_s, steady_tok_s(r.spans, c) or float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.10)
    parser.add_argument("--profile", choices=sorted(PROFILE_SCALE), default="nightly")
    args = parser.parse_args(argv)
    caps = ", ".join(f"{profile_scale(args.profile, c)[2]:g} s at {c}" for c in (1, 8, 32))
    print(f"steps x{args.scale:g} on base and MTP ({MODEL}, {args.profile} workload, caps {caps})")
    print(f"{'conc':>4}  {'figure':<20} {'base':>16} {'mtp':>16} {'speedup':>15}")
    for c in (1, 8, 32):
        per_stream, minimum, cap = profile_scale(args.profile, c)
        prompts = max(per_stream * c, minimum)
        base0, base1 = figures(c, prompts, cap, 1.0, False), figures(c, prompts, cap, args.scale, False)
        mtp0, mtp1 = figures(c, prompts, cap, 1.0, True), figures(c, prompts, cap, args.scale, True)
        for i, name in enumerate(("decode_tok_s", "steady_decode_tok_s")):
            b0, b1, m0, m1 = base0[i], base1[i], mtp0[i], mtp1[i]
            s0, s1 = m0 / b0, m1 / b1
            print(
                f"{c:>4}  {name:<20} {b0:6.1f} -> {b1:6.1f} {m0:6.1f} -> {m1:6.1f} {s0:5.3f} -> {s1:5.3f}"
                f"  ({b1 / b0 - 1:+.1%}, {m1 / m0 - 1:+.1%}, {s1 / s0 - 1:+.1%})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
