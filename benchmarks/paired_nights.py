"""Paired A/B nights of the seed suite: OLD against NEW on one box, through the plugin's
own paired session, on the virtual clock (`python benchmarks/nights.py --paired`).

    python benchmarks/nights.py --paired --nights 20
    python benchmarks/nights.py --paired --nights 20 --recordings 5   # 5 folders, each with its nights

Each night is one pytest session of the whole seed suite (nights.py's run_session: the seed
tests called with the plugin's `llmperf` fixture over a PerfSession, in the plugin's order)
with `--llmperf-against-sim-args` OLD and `--llmperf-sim-args` NEW, so the session is the
plugin's paired one (pytest_llmperf/judging/paired.py): every run OLD and NEW in
alternating blocks on fresh starts, auto adding blocks while a verdict is inconclusive, NEW
judged against OLD's runs. Nothing of the paired rule is re-implemented here.

Both images run on one box: every start of the night, OLD's and NEW's, draws from that
night's noise (nights.NoiseModel: its shift of the box, its spread between starts, slow
starts, noisier nights), each start its own draw. OLD runs the simulator's defaults; NEW
runs with NEW_FLAGS, a step factor of one, so its servers are the same engine as OLD's and
are told apart by their flags; a change (nights.py's scenarios: one server's decode 5 %
slower, a 0.03 acceptance drop, a 5 % and a 10 % speedup loss, a whole image 5 % slower)
applies to NEW's starts of the servers it names, as nights.py applies it to a night's starts.

Before its nights, each recording records a baselines folder (nights.Bench.record, on its
recording night), as a team's committed folder: a paired session judges nothing against it
but pools its spread between starts. A paired session keeps no history, so every night
stands alone (--llmperf-confirm does not apply) and a change is read in the night it comes.

Prints: the unchanged nights red, their failing cells per red night and each cell's
false-red rate (nights.print_unchanged), the nights with a suspect or an inconclusive cell
and the inconclusive verdicts by concurrency; per change, how often a cell it touches is
flagged (red or suspect) and red in the same night, and how often the night is red at all;
the GPU-minutes of both images a night against the seeds' fixed runs (of one image). With
`--recordings N` above 1 each rate is the mean over recordings with its spread across them
(benchmarks/recordings.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import shlex
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import nights
from nights import (
    PROFILE,
    SEED_FIXED_S,
    Bench,
    Change,
    Item,
    Night,
    NightNoise,
    NightSummary,
    NoiseModel,
    Recording,
    all_servers,
    gpu_s,
    night,
    night_options,
    print_unchanged,
    record_all,
    recording_seed,
    scenarios,
    seed_items,
)
from nightsim import Draw, StartNoise
from recordings import PAIRED_CHANGE_FIGURES, PAIRED_UNCHANGED_FIGURES, aggregate, paired_rates, print_spreads

from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.workload.prompts import load_dataset
from pytest_llmperf.workload.requests import SampledRequest
from pytest_llmperf.workload.workload import Workload

OLD_FLAGS = ""  # --llmperf-against-sim-args: the simulator's defaults
NEW_FLAGS = "--sim-step-time-scale 1"  # --llmperf-sim-args: the same engine, its servers told apart by the flag
UNCHANGED = -1  # a job's change index for an unchanged night


def paired_options(flags: Mapping[str, Any] | None = None) -> LlmperfOptions:
    """A paired night's options: the nightly profile on the simulator, OLD_FLAGS against
    NEW_FLAGS, no history (a paired session keeps none); `flags`: more command-line values."""
    return night_options(flags={"llmperf_against_sim_args": OLD_FLAGS, "llmperf_sim_args": NEW_FLAGS, **(flags or {})})


def is_new(spec: ServerSpec) -> bool:
    """Whether `spec` is NEW's server (the paired session appends NEW_FLAGS to its sim_args)."""
    new = tuple(shlex.split(NEW_FLAGS))
    return tuple(spec.sim_args[len(spec.sim_args) - len(new) :]) == new


def paired_draw(model: NoiseModel, noise: NightNoise, changes: Mapping[str, Change] | None = None) -> Draw:
    """The target's draw for every start of a paired night: OLD's and NEW's starts alike from
    the night's `noise`, `changes` applied to NEW's starts alone."""
    old, new = model.draw(noise), model.draw(noise, changes)

    def start(spec: ServerSpec, count: int) -> StartNoise:
        return (new if is_new(spec) else old)(spec, count)

    return start


def paired_night(
    rootdir: Path,
    items: Sequence[Item],
    model: NoiseModel,
    noise: NightNoise,
    prompts: Callable[[Endpoint, Workload], list[SampledRequest]],
    datasets: Mapping[tuple[str, str | None], Any] | None,
    *,
    changes: Mapping[str, Change] | None = None,
    options: LlmperfOptions | None = None,
) -> Night:
    """One paired night: a fresh paired session of `items` (paired_options, or `options`) on
    virtual servers drawing `noise`, `changes` on NEW's, beside the baselines folder under
    `rootdir` (whose spread it pools)."""
    options = options or paired_options()
    result = night(rootdir, items, model, noise, prompts, datasets, changes=changes, options=options, draw=paired_draw)
    if result.errors.keys() - result.outcomes.keys():  # a failing test's message is an error too
        raise RuntimeError(f"paired night {noise.key}: the session did not finish cleanly: {result.errors}")
    return result


def night_key(k: int, n: int, names: Sequence[str]) -> str:
    """The noise key of night `n` of change `k` (UNCHANGED: an unchanged night)."""
    return f"paired:n{n}" if k == UNCHANGED else f"paired:{names[k]}:{n}"


def summarise(bench: Bench, k: int, n: int) -> NightSummary:
    """Night `n` of change `k` (UNCHANGED: unchanged) of `bench`'s recording, summarised; its
    GPU seconds count a server start for each start beyond one per server and image."""
    changes = None if k == UNCHANGED else scenarios(bench.servers)[k].changes(bench.servers)
    noise = bench.model.night(bench.seed, night_key(k, n, [s.name for s in scenarios(bench.servers)]))
    result = paired_night(
        bench.rootdir, bench.items, bench.model, noise, bench.prompts, bench.datasets, changes=changes
    )
    summary = bench.summary(n, result)
    return dataclasses.replace(summary, gpu_s=gpu_s(result, bench.model.start_s, 2 * len(bench.servers)))


def _night(job: tuple[int, int, int]) -> tuple[int, int, NightSummary]:
    r, k, n = job
    return r, k, summarise(nights.BENCHES[r], k, n)


def touched(summary: NightSummary, flags: Callable[[str, str, str], bool]) -> str:
    """ "red", "suspect" or "" for the cells a change touches (its scenario's `flags`)."""
    statuses = [st for t, s, _, m, st in summary.flagged if flags(s, m, t)]
    return "red" if any(st != "suspect" for st in statuses) else "suspect" if statuses else ""


def inconclusive(summary: NightSummary) -> bool:
    """Whether some cell of the night was left inconclusive (its test warns)."""
    return any(cell[4] == "inconclusive" for cell in summary.cells)


def run(args: argparse.Namespace) -> int:
    """nights.py --paired: the recordings, then their unchanged and changed paired nights."""
    if args.confirm is not None or args.design != "adaptive":
        raise SystemExit("nights.py --paired: --confirm and --design do not apply (a paired night keeps no history)")
    model = NoiseModel.load(args.params, args.double)
    started = time.monotonic()
    items = seed_items()
    servers = all_servers(items)
    options = paired_options()
    dataset = load_dataset(options.dataset_name, options.dataset, nights.ROOT)
    datasets = {(options.dataset_name, options.dataset): dataset}
    prompts = nights.SeedPrompts(dataset)
    seeds = [recording_seed(args.seed, r) for r in range(args.recordings)]
    names = [s.name for s in scenarios(servers)]
    print(
        f"paired nights: the seed suite ({len(items)} tests, {len(servers)} servers) at the {PROFILE} profile through "
        f"PerfSession's paired session (--llmperf-against-sim-args {OLD_FLAGS or 'defaults'} "
        f"--llmperf-sim-args '{NEW_FLAGS}', blocks {options.repetitions}, at most {options.max_repetitions}) on the "
        f"virtual clock; {args.nights} unchanged nights, {args.episodes} nights per change; noise "
        f"{args.params.name}{' doubled' if args.double else ''}; seed {args.seed}"
        + (f"; {args.recordings} recordings, seeds {seeds[0]} to {seeds[-1]}" if args.recordings > 1 else ""),
        flush=True,
    )

    def say(line: str) -> None:
        if not args.quiet:
            print(f"{line} ({time.monotonic() - started:.0f} s)", flush=True)

    with tempfile.TemporaryDirectory(prefix="llmperf-paired-nights-") as tmp:
        nights.BENCHES[:] = [
            Bench(Path(tmp, f"recording-{r}"), items, servers, model, prompts, datasets, seed, None, record_nights=1)
            for r, seed in enumerate(seeds)
        ]
        for bench in nights.BENCHES:
            bench.rootdir.mkdir()
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            recordings = record_all(pool, say, started)
            if recordings is None:
                return 1
            judged = judge_all(pool, recordings, names, args, say)
    report(recordings, judged, names, model, servers, args)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


Judged = dict[int, dict[int, list[NightSummary]]]  # recording -> change (UNCHANGED too) -> its nights in order


def judge_all(
    pool: Any, recordings: list[Recording], names: Sequence[str], args: argparse.Namespace, say: Callable[[str], None]
) -> Judged:
    """Every recording's unchanged nights and each change's nights, over the workers; the
    unchanged ones also as each recording's `nights`."""
    work = [(r, UNCHANGED, n) for r in range(len(recordings)) for n in range(args.nights)]
    work += [(r, k, n) for r in range(len(recordings)) for k in range(len(names)) for n in range(args.episodes)]
    judged: Judged = {r: {} for r in range(len(recordings))}
    for r, k, summary in pool.imap_unordered(_night, work):
        judged[r].setdefault(k, []).append(summary)
        shown = ", ".join(f"{s} @ {c} {m} {st}" for _, s, c, m, st in summary.flagged)
        what = "unchanged" if k == UNCHANGED else names[k]
        say(
            f"  {nights.label(r)}{what} night {summary.index + 1}: {'RED' if summary.red else 'green'}"
            f"{' ' + shown if shown else ''}; {summary.starts} starts, {summary.gpu_s / 60:.1f} GPU-min"
        )
    for r, recording in enumerate(recordings):
        for got in judged[r].values():
            got.sort(key=lambda s: s.index)
        recording.nights = judged[r].get(UNCHANGED, [])
    return judged


def change_nights(
    judged: Mapping[int, Sequence[NightSummary]], servers: Sequence[ServerSpec]
) -> dict[int, list[tuple[str, bool]]]:
    """Per change (by index): each night's status in the cells it touches, and whether the night was red."""
    return {
        k: [(touched(s, scenario.flags), s.red) for s in judged.get(k, [])]
        for k, scenario in enumerate(scenarios(servers))
    }


def report(
    recordings: Sequence[Recording],
    judged: Judged,
    names: Sequence[str],
    model: NoiseModel,
    servers: Sequence[ServerSpec],
    args: argparse.Namespace,
) -> None:
    """The unchanged nights' table (all recordings' nights together), then one recording's
    changes and GPU-minutes, or each rate's mean and spread over the recordings."""
    fixed = len(servers) * sum(SEED_FIXED_S.values())
    every = [s for recording in recordings for s in recording.nights]
    print_unchanged(every, f"{len(recordings)} recordings" if len(recordings) > 1 else "")
    warned = sum(inconclusive(s) for s in every)
    print(f"nights with an inconclusive cell (a warning): {warned} of {len(every)} ({warned / len(every):.1%})")
    by_concurrency: dict[int, list[bool]] = {}
    for cell in (cell for s in every for cell in s.cells):
        by_concurrency.setdefault(cell[2], []).append(cell[4] == "inconclusive")
    print(
        "inconclusive verdicts by concurrency: "
        + ", ".join(f"{c}: {statistics.mean(v):.1%}" for c, v in sorted(by_concurrency.items()))
    )
    rows = [
        paired_rates(recording.nights, change_nights(judged[r], servers), names)
        for r, recording in enumerate(recordings)
    ]
    if len(recordings) > 1:
        print_spreads(
            aggregate(rows),
            len(recordings),
            args.nights,
            args.episodes,
            fixed / 60,
            unchanged_figures=PAIRED_UNCHANGED_FIGURES,
            change_figures=PAIRED_CHANGE_FIGURES,
            changes_title=f"changes ({args.episodes} paired nights each per recording; a cell the change touches "
            "is red or suspect in the same night)",
            paired=True,
        )
        return
    (row,) = rows
    if args.episodes:
        print()
        print(
            f"changes ({args.episodes} paired nights each; a cell the change touches is red or suspect in the same "
            "night)"
        )
        print(f"{'change':<42} " + " ".join(f"{figure:>18}" for figure in PAIRED_CHANGE_FIGURES))
        for name in names:
            if (name, PAIRED_CHANGE_FIGURES[0]) in row:
                print(f"{name:<42} " + " ".join(f"{row[name, figure]:>18.0%}" for figure in PAIRED_CHANGE_FIGURES))
    night_s = [s.gpu_s for s in every]
    mean_s = statistics.mean(night_s)
    print()
    print(
        f"GPU-minutes a night, both images (simulated runs, plus {model.start_s:g} s for each server start beyond one "
        f"per server and image): mean {mean_s / 60:.1f}, max {max(night_s) / 60:.1f}, against {fixed / 60:.1f} for "
        f"the seeds' fixed runs of one image ({mean_s / fixed:.0%})"
    )
