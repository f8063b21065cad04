"""Apache Otava against MongoDB's signal-processing-algorithms on simulated nightly histories.

    python benchmarks/drift_detectors.py [--trials 10] [--seed 0] [--noise 0.01 0.02] [--check-only]

Both are published change-point detectors for performance series. Otava (apache-otava,
formerly DataStax's Hunter) has two: `compute_change_points`, E-Divisive over sliding
windows with a Student's t-test and a merge step (Fleming et al. 2023), and
`compute_change_points_orig`, the original E-Divisive with a permutation test (Matteson
and James 2014; seeded here). MongoDB's library runs E-Divisive means with a permutation
test (unseeded: numpy's global generator). Each history is 12 nights at the old level, then 6 nights
of one of:

    drift    -1.5 % per night (-8.6 % after 6 nights; each night within a 5 % gate of the last)
    step     one step of -4 % on the first new night, held (each night passes a 5 % gate)
    none     no change

with a relative Gaussian run-to-run noise (1 % is the public figure for throughput at
concurrency 8 and above; 0.5 % and 2 % bracket it). A detector "finds" the change when it
reports a change point at night 10 or later with the level after it lower than before; a
false alarm is any change point in a `none` history. Then the plugin's own history check
(baselines/drift.sustained_shift) on the same histories. Pure computation: the default
10 trials take seconds; docs/history.md has the figures of 100. A library that is not
installed is skipped with a note.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

BEFORE, AFTER = 12, 6
NOISES = (0.01, 0.02)  # docs/history.md also has 0.5 %


def history(kind: str, noise: float, rng: np.random.Generator) -> list[float]:
    level = [1.0] * BEFORE
    if kind == "drift":
        level += [(1 - 0.015) ** k for k in range(1, AFTER + 1)]
    elif kind == "step":
        level += [0.96] * AFTER
    else:
        level += [1.0] * AFTER
    return [400.0 * v * (1 + rng.normal(0, noise)) for v in level]


Detector = Callable[[list[float]], list[int]]


def detectors() -> tuple[dict[str, Detector], list[str]]:
    found: dict[str, Detector] = {}
    missing = []
    try:
        from otava.analysis import compute_change_points

        def otava(p: float, magnitude: float = 0.0) -> Detector:
            def detect(series: list[float]) -> list[int]:
                points, _ = compute_change_points(series, window_len=30, max_pvalue=p, min_magnitude=magnitude)
                return [cp.index for cp in points]

            return detect

        for p in (0.001, 0.01):
            found[f"otava t-test p={p:g}"] = otava(p)
        found["otava t-test p=0.01 min2%"] = otava(0.01, 0.02)

        from otava.analysis import compute_change_points_orig

        def otava_ediv(p: float) -> Detector:
            def detect(series: list[float]) -> list[int]:
                points, _ = compute_change_points_orig(series, max_pvalue=p, seed=0)
                return sorted(int(cp.index) for cp in points)

            return detect

        for p in (0.01, 0.05):
            found[f"otava e-divisive p={p:g}"] = otava_ediv(p)
    except ImportError:
        missing.append("apache-otava")
    try:
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

        def spa(p: float) -> Detector:
            def detect(series: list[float]) -> list[int]:
                return sorted(e_divisive(series, pvalue=p, permutations=100))

            return detect

        for p in (0.01, 0.05):
            found[f"spa e-divisive p={p:g}"] = spa(p)
    except ImportError:
        missing.append("signal-processing-algorithms")
    return found, missing


def judge(series: list[float], points: list[int]) -> bool:
    """A downward change found in the new nights (index 10 or later)."""
    for index in points:
        if index >= BEFORE - 2 and np.mean(series[index:]) < np.mean(series[:index]):
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", type=float, nargs="+", default=list(NOISES), help="relative run-to-run noise")
    parser.add_argument("--check-only", action="store_true", help="only the plugin's history check")
    args = parser.parse_args()
    if not args.check_only:
        compare_detectors(args)
    flag_rule(args)


def compare_detectors(args: argparse.Namespace) -> None:
    found, missing = detectors()
    for name in missing:
        print(f"note: {name} is not installed; skipped")
    print(f"{args.trials} histories per cell: {BEFORE} nights at the old level, then {AFTER} new ones")
    header = f"{'detector':<26} {'noise':>5}  {'drift found':>11}  {'step found':>10}  {'false alarms':>12}  "
    header += f"{'first cp (drift)':>16}  {'same twice':>10}  {'ms/call':>7}"
    print(header)
    print("-" * len(header))
    for name, detect in found.items():
        for noise in args.noise:
            rng = np.random.default_rng(args.seed)
            hits = {"drift": 0, "step": 0, "none": 0}
            first: list[int] = []
            stable = 0
            calls, spent = 0, 0.0
            for _ in range(args.trials):
                for kind in hits:
                    series = history(kind, noise, rng)
                    started = time.perf_counter()
                    points = detect(series)
                    spent += time.perf_counter() - started
                    calls += 1
                    if kind == "none":
                        hits[kind] += bool(points)
                    else:
                        hits[kind] += judge(series, points)
                    if kind == "drift":
                        late = [i for i in points if i >= BEFORE - 2]
                        if late:
                            first.append(late[0])
                        stable += detect(series) == points  # the same history, the same answer
            where = f"{np.median(first):.0f}" if first else "-"
            print(
                f"{name:<26} {noise:>5.1%}  {hits['drift'] / args.trials:>11.0%}  {hits['step'] / args.trials:>10.0%}  "
                f"{hits['none'] / args.trials:>12.0%}  {where:>16}  {stable / args.trials:>10.0%}  "
                f"{1000 * spent / calls:>7.2f}"
            )
    print(f"(true change at night {BEFORE}; 'same twice': the detector gave the same points on a second call)")


def flag_rule(args: argparse.Namespace) -> None:
    """The plugin's history check (baselines/drift.sustained_shift, on Otava) on the same
    histories, every night with outcome pass: how often each is flagged."""
    try:
        from pytest_llmperf.baselines import drift
    except ImportError:
        print("note: pytest_llmperf is not importable; the history check is not run")
        return
    if not drift.detector_available():
        return
    print()
    print(
        f"the history check (sustained_shift: Otava p={drift.PVALUE:g}, min change {drift.MIN_CHANGE:.0%}, a worse "
        f"shift, >= {drift.MIN_RUNS} runs since, every run passed its gate), {args.trials} histories per cell:"
    )
    print("night over night, the drift moves -1.5 % (a 5 % gate of tonight against last night passes every night)")
    header = f"{'noise':>5}  {'drift flagged':>13}  {'step flagged':>12}  {'no change flagged':>17}  "
    header += f"{'drift: median fall':>18}"
    print(header)
    print("-" * len(header))
    for noise in args.noise:
        rng = np.random.default_rng(args.seed)
        flagged = {"drift": 0, "step": 0, "none": 0}
        falls = []
        for _ in range(args.trials):
            for kind in flagged:
                values = history(kind, noise, rng)
                lines = [
                    {"metric": "steady_decode_tok_s", "value": v, "outcome": "pass", "date": f"night {i:02d}"}
                    for i, v in enumerate(values)
                ]
                shift = drift.sustained_shift(lines)
                if shift is not None:
                    flagged[kind] += 1
                    if kind == "drift":
                        falls.append(shift.relative)
        fall = f"{np.median(falls):+.1%}" if falls else "-"
        print(
            f"{noise:>5.1%}  {flagged['drift'] / args.trials:>13.0%}  {flagged['step'] / args.trials:>12.0%}  "
            f"{flagged['none'] / args.trials:>17.0%}  {fall:>18}"
        )


if __name__ == "__main__":
    main()
