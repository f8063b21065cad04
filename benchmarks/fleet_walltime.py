"""Wall time of the seed suite on one slot against four: is the spread over GPUs worth it?

    python benchmarks/fleet_walltime.py                  # smoke profile, simulator, 1 run each
    python benchmarks/fleet_walltime.py --runs 3 --profile nightly

Runs `pytest tests/perf --llmperf-sim --llmperf-profile P` in a fresh process twice per
round: as one process (`-n 0`, every server one after the other) and as four xdist
workers on four fake one-GPU slots (`-n 4 --dist loadgroup --llmperf-gpus 0,1,2,3`), and
prints each wall time, the median of each, and their ratio. Outcomes are printed, not
judged (a loaded machine reads `invalid`; that says the machine was busy).

What to expect: the seed suite is two models, so two groups (a model's base and MTP share
a slot), and at most two slots are busy: about 2x, not 4x (docs/scaling.md). The
simulator's servers run on this machine's CPUs, so the figure means something only on a
machine with a free core per worker and its simulated server; not a 2-core shared box.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPREAD = ("-n", "4", "--dist", "loadgroup", "--llmperf-gpus", "0,1,2,3")


def one(profile: str, extra: tuple[str, ...]) -> tuple[float, str]:
    argv = [sys.executable, "-m", "pytest", "tests/perf", "--llmperf-sim", "--llmperf-profile", profile]
    argv += ["-q", "-p", "no:cacheprovider", *extra]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    tail = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return wall, (tail[-1].strip("= ") if tail else f"exit {done.returncode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="rounds of (-n 0, -n 4); default 1")
    parser.add_argument("--profile", default="smoke", choices=("smoke", "nightly", "full"))
    args = parser.parse_args()
    walls: dict[str, list[float]] = {"-n 0": [], "-n 4": []}
    for i in range(args.runs):
        for name, extra in (("-n 0", ()), ("-n 4", SPREAD)):
            wall, outcome = one(args.profile, extra)
            walls[name].append(wall)
            print(f"round {i + 1}  {name}: {wall:7.1f} s  ({outcome})", flush=True)
    one_slot, four = statistics.median(walls["-n 0"]), statistics.median(walls["-n 4"])
    print(
        f"median wall: -n 0 {one_slot:.1f} s, -n 4 --llmperf-gpus 0,1,2,3 {four:.1f} s: {one_slot / four:.2f}x faster"
    )


if __name__ == "__main__":
    main()
