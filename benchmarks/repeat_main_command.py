"""Run the README's main command N times and count red runs: is the gate stable?

    python benchmarks/repeat_main_command.py --runs 10
    python benchmarks/repeat_main_command.py --runs 10 --busy-core      # one core kept busy
    python benchmarks/repeat_main_command.py --runs 10 --sim-args "--sim-step-time-scale 1.10"

Each run is `pytest tests/perf --llmperf-sim --llmperf-profile smoke` in a fresh pytest
process against the committed baselines, with a JSON report read back for the verdicts.
`--busy-core` starts one process that spins on a core for the whole time (a pure-Python
busy loop, `os.sched_setaffinity` to core 0 where the system allows it): the state of a CI
machine that shares its two cores with something else.
Prints one line per run (exit code, counts of each verdict, the failing cells with why a
run was invalid, the runs a busy host spoiled and the session made again) and a
total; exits 0 whatever the counts (it measures, it does not judge).
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The README's main command (quiet, no cache), as the benchmarks that repeat it run it from ROOT.
MAIN_COMMAND = [sys.executable, "-m", "pytest", "tests/perf", "--llmperf-sim", "--llmperf-profile", "smoke", "-q"]
MAIN_COMMAND += ["-p", "no:cacheprovider"]


def _spin() -> None:  # pragma: no cover - runs in a child process
    try:
        os.sched_setaffinity(0, {0})
    except (AttributeError, OSError):
        pass
    while True:
        pass


def one_run(sim_args: str, report: Path) -> tuple[int, collections.Counter, list[str], list[str], float]:
    cmd = [*MAIN_COMMAND, "--llmperf-report", str(report)]
    if sim_args:
        cmd += ["--llmperf-sim-args", sim_args]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    counts: collections.Counter = collections.Counter()
    red: list[str] = []
    undecided: list[str] = []
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return proc.returncode, counts, ["no report: " + " | ".join(tail)], [], elapsed
    for run in data.get("runs", []):  # runs its host spoiled, made again (validity.host_behind)
        again = [n for n in run.get("notes", []) if "was made twice" in n]
        where = f"{(run.get('server') or {}).get('name')}@{(run.get('workload') or {}).get('concurrency')}"
        undecided += [f"{where} {n}" for n in again]
    for gate in data.get("verdicts", []):
        for v in gate.get("verdicts", []):
            counts[v["status"]] += 1
            cell = f"{gate['server']}@{gate['concurrency']} {v['metric']}"
            if v["status"] == "inconclusive":
                undecided.append(cell)
            elif v["status"] == "invalid":  # why, its first line (a dead server's log follows)
                red.append(f"{cell} invalid ({v.get('hint', '').splitlines()[0] if v.get('hint') else '?'})")
            elif v["status"] not in ("pass", "improved"):
                red.append(f"{cell} {v['status']}")
    return proc.returncode, counts, red, undecided, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--busy-core", action="store_true", help="keep one core busy with a spinning process")
    parser.add_argument("--sim-args", default="", help="passed as --llmperf-sim-args (e.g. a step-time scale)")
    args = parser.parse_args(argv)

    spinner = None
    if args.busy_core:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
    red_runs = 0
    totals: collections.Counter = collections.Counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(1, args.runs + 1):
                rc, counts, red, undecided, elapsed = one_run(args.sim_args, Path(tmp) / f"report-{i}.json")
                totals.update(counts)
                red_runs += rc != 0
                shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                print(
                    f"run {i}: exit {rc} in {elapsed:.0f} s; {shown}"
                    + (f"; inconclusive, or made twice: {'; '.join(undecided)}" if undecided else "")
                    + (f"; red: {'; '.join(red)}" if red else ""),
                    flush=True,
                )
    finally:
        if spinner is not None:
            spinner.terminate()
            spinner.join()
    condition = "one core busy" if args.busy_core else "quiet"
    extra = f", sim args {shlex.quote(args.sim_args)}" if args.sim_args else ""
    print(
        f"{red_runs} red of {args.runs} runs ({condition}{extra}); verdicts: "
        + ", ".join(f"{n} {s}" for s, n in sorted(totals.items()))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
