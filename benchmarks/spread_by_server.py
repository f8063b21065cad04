"""Do the seed suite's servers share their relative spread between starts? The paired and
baseline gates pool it over a folder's servers at one concurrency (stats.spread.pooled_spread),
which assumes they do.

Records `paired_power.py`'s baselines folders (a recording session of the seed suite's
four servers at one concurrency, auto's five starts each, on the virtual clock with the
noise of benchmarks/noise_params.json) and prints each server's relative spread of the
gated steady decode figure, as the store reads it back, pooled over the folders, beside
the pool of all four.

    python benchmarks/spread_by_server.py --folders 40
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from paired_power import PairedBench, stored_samples  # noqa: E402

from pytest_llmperf.metrics.registry import GATED_DECODE  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=32, choices=[1, 8, 32])
    parser.add_argument("--reps", type=int, default=None, help="repetitions a server (default: auto's, five)")
    args = parser.parse_args(argv)
    c = args.concurrency
    variances: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="llmperf-spread-") as tmp:
        bench = PairedBench.load(Path(tmp), stored_reps=args.reps)
        for i in range(args.folders):
            for server, values in stored_samples(bench.folder(c, i), c, GATED_DECODE).items():  # trial i's folder
                variances.setdefault(server, []).append(statistics.variance(values) / statistics.mean(values) ** 2)
    print(f"{GATED_DECODE} at concurrency {c}: relative spread between starts, {args.folders} folders")
    for name, v in variances.items():
        print(f"  {name:<28} {statistics.mean(v) ** 0.5:.2%}")
    pooled = statistics.mean(x for v in variances.values() for x in v) ** 0.5
    print(f"  {'all four pooled':<28} {pooled:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
