"""Do the seed suite's servers share their relative spread between starts? The paired and
baseline gates pool it over a folder's servers at one concurrency (stats.spread.pooled_spread),
which assumes they do.

Draws `paired_power.py`'s stored baseline folders (five starts of each of the four
servers, on the virtual clock with the public noise between starts) and prints each
server's relative spread of the gated steady decode figure, pooled over the folders,
beside the pool of all four.

    python benchmarks/spread_by_server.py --folders 40
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from paired_power import stored  # noqa: E402

from pytest_llmperf.metrics.registry import GATED_DECODE  # noqa: E402
from pytest_llmperf.sim.calibration import synthetic_prompt_lens  # noqa: E402

SERVERS = ("27B base", "27B MTP", "35B base stand-in", "35B MTP stand-in")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    c = args.concurrency
    lens = synthetic_prompt_lens(max(16 * c, 64) + 16)
    variances: list[list[float]] = [[] for _ in SERVERS]
    for i in range(args.folders):
        cells, _ = stored(c, lens, args.reps, f"0:{c}:{i}")  # paired_power's folder of trial i
        for k, cell in enumerate(cells):
            values = [run.figures[GATED_DECODE] for run in cell]
            variances[k].append(statistics.variance(values) / statistics.mean(values) ** 2)
    print(f"{GATED_DECODE} at concurrency {c}: relative spread between starts, {args.folders} folders of {args.reps}")
    for name, v in zip(SERVERS, variances):
        print(f"  {name:<18} {statistics.mean(v) ** 0.5:.2%}")
    pooled = statistics.mean(x for v in variances for x in v) ** 0.5
    print(f"  {'all four pooled':<18} {pooled:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
