"""Tonight's box as a reference, tried: a candidate rule that judges each server's steady
decode against tonight's shared shift of the box, set beside the plugin's rule on the same
nights (`python benchmarks/box_reference.py`).

    python benchmarks/box_reference.py --recordings 20 --nights 20 --episodes 8 --jobs 1

The nights are nights.py's: each recording records its baselines (nights.Bench.record),
then runs NIGHTS_WINDOW nights of warm-up and `--nights` unchanged nights of the whole seed
suite through the plugin's own session (nights.night: auto repetitions, the history,
--llmperf-confirm 2), then `--episodes` times the first two nights of one server's decode
5 % slower (nights.py's change, its noise drawn as nights.py draws an episode's nights),
each from the history of 20 of its unchanged nights, the whole suite run so that every server
is measured. The plugin judges every night as it does; nothing of its rule is copied here.

The candidate (not in the plugin): for each steady decode cell (a server at a
concurrency), x = ln(measured / baseline), the box's shift tonight the median of the other
servers' x at that concurrency, and the residual r = x - shift. A cell is red where r is
below -3 % (the plugin's tolerance for steady decode) and below -k standard deviations of
the cell's residuals over the 20 nights before, r measured from 0 (the baseline's level) or
from their median (the cell's last nights); on one night, or confirmed on the next (the
same cell red on both, as --llmperf-confirm 2). The box's own shift is left to the plugin's
rule (a whole image slower moves every server alike and leaves no residual).

Prints, for the steady decode cells alone, the mean over recordings [10th-90th percentile]
of: the unchanged nights with a red cell, and the drop read red (on its first night, or
within two), under the plugin's rule and under each candidate. Equal false reds decide: the
candidate earns its place where, at no more unchanged red nights than the plugin's rule, it
catches the drop within two nights at least 5 points more often.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import pickle
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nights
from nights import (
    DECODE_SERVER,
    NIGHTS_WINDOW,
    PARAMS,
    Bench,
    Change,
    HistoryWindow,
    Night,
    NoiseModel,
    SeedPrompts,
    all_servers,
    load_dataset,
    night,
    night_options,
    recording_seed,
    seed_items,
)
from recordings import spread

from pytest_llmperf.metrics.registry import GATED_DECODE, metric

METRIC = GATED_DECODE
TOLERANCE = metric(METRIC).tolerance.limit  # the plugin's default for steady decode (relative)
KS = (2.33, 2.58, 3.09, 3.72)  # one-sided 99 %, 99.5 %, 99.9 %, 99.99 %
Cell = tuple[str, int]  # (server, concurrency)


@dataclass(frozen=True)
class Cells:
    """One night's steady decode cells: x = ln(measured / baseline) by (server, concurrency),
    and the cells the plugin's rule read red (failing, not suspect)."""

    x: dict[Cell, float]
    red: frozenset[Cell]


def cells(result: Night) -> Cells:
    x = {
        (g.server, g.concurrency): math.log(v.measured / v.baseline)
        for g in result.gates
        for v in g.verdicts
        if v.metric == METRIC and v.measured and v.baseline
    }
    red = frozenset((server, c) for _, server, c, metric, _ in result.failing() if metric == METRIC)
    return Cells(x, red)


def residuals(night_cells: Cells) -> dict[Cell, float]:
    """Each cell's x less the median of the other servers' x at its concurrency."""
    out = {}
    for (server, c), x in night_cells.x.items():
        others = [v for (s, k), v in night_cells.x.items() if k == c and s != server]
        if others:
            out[server, c] = x - statistics.median(others)
    return out


CENTERS = ("baseline", "nights")  # what a residual is judged against: the recorded level, or its last nights'
CONFIRMS = (1, 2)  # red on one night, or on two in a row in the same cell (the plugin's --llmperf-confirm 2)


def red_cells(tonight: Cells, before: Sequence[Cells], k: float, center: str) -> set[Cell]:
    """The cells the candidate reads red tonight: the residual below -TOLERANCE and below -k
    standard deviations of the cell's residuals over `before`, both measured from `center`:
    0 (the recorded baseline's level) or the median of those residuals."""
    past = [residuals(c) for c in before]
    red = set()
    for cell, r in residuals(tonight).items():
        series = [p[cell] for p in past if cell in p]
        if len(series) < 5:
            continue
        width = statistics.stdev(series)
        moved = r - (statistics.median(series) if center == "nights" else 0.0)
        if moved < -TOLERANCE and width > 0 and moved < -k * width:
            red.add(cell)
    return red


@dataclass(frozen=True)
class Episode:
    """The decode drop's first two nights: their cells, whether the plugin flagged the changed
    server's steady decode on the first, and where its window starts among all unchanged nights."""

    first: Cells
    second: Cells
    flagged: bool
    start: int


@dataclass(frozen=True)
class Outcome:
    """A recording's nights: the unchanged ones' cells (the warm-up first) and its episodes."""

    unchanged: list[Cells]
    episodes: list[Episode]


BENCHES: list[Bench] = []  # one per recording, the parent's, inherited by forked workers


def trial(job: tuple[int, int, int]) -> tuple[int, Outcome]:
    """Recording `r`: its baselines, its warm-up and `counted` unchanged nights in order (one
    history), then `episodes` times the decode drop's first two nights, each from a window of them."""
    r, counted, episodes = job
    bench = BENCHES[r]
    recorded = bench.record()
    if recorded.failed:
        raise RuntimeError(f"recording {r + 1} failed: {recorded.failed}")

    def judged(noise_name: str, window: HistoryWindow, changes: dict[str, Change] | None = None) -> Night:
        noise = bench.model.night(bench.seed, noise_name)
        return night(
            bench.rootdir,
            bench.items,
            bench.model,
            noise,
            bench.prompts,
            bench.datasets,
            changes=changes,
            history=window.path,
            confirm=bench.confirm,
        )

    window = HistoryWindow(bench.rootdir / "history.jsonl")
    unchanged, lines = [], []
    for n in range(-NIGHTS_WINDOW, counted):
        result = judged(f"n{n}", window)
        lines.append(window.after_session())
        unchanged.append(cells(result))
    window.close()
    seen = []
    change = nights.scenarios(bench.servers)[0]  # one server's decode 5 % slower; its name draws its noise
    drop = change.changes(bench.servers)
    for e, start in enumerate(nights.window_starts(counted, episodes)):
        first = NIGHTS_WINDOW + start  # the window's first night among all (the warm-up first)
        window = HistoryWindow(bench.rootdir / f"history-{e}.jsonl", prior=lines[first : first + NIGHTS_WINDOW])
        one = judged(f"{change.name}:{e}:0", window, drop)  # nights.py's noise for an episode's nights
        window.after_session()
        two = judged(f"{change.name}:{e}:1", window, drop)
        window.close()
        flagged = any(s == DECODE_SERVER and m == METRIC for _, s, _, m, _ in one.flagged())
        seen.append(Episode(cells(one), cells(two), flagged, first))
    return r, Outcome(unchanged, seen)


Key = tuple[str, float, int]  # a candidate: (center, k, confirm)
CANDIDATES: list[Key] = [(center, k, confirm) for confirm in CONFIRMS for center in CENTERS for k in KS]


@dataclass(frozen=True)
class Rates:
    """One recording's rates, steady decode cells alone."""

    plugin_unchanged: float  # unchanged nights with a red decode cell, the plugin's rule
    plugin_flagged: float  # the drop's first nights with the changed server's decode red or suspect
    plugin_red: float  # ... red on the first or the second night
    candidate_unchanged: dict[Key, float]
    candidate_red: dict[Key, float]  # red on the first night (confirm 1), on the second in a cell red on both (2)


def rates(outcome: Outcome, counted: int) -> Rates:
    every = outcome.unchanged

    def reds(i: int, k: float, center: str) -> set[Cell]:  # unchanged night i's red cells
        return red_cells(every[i], every[max(0, i - NIGHTS_WINDOW) : i], k, center)

    def unchanged_red(k: float, center: str, confirm: int) -> float:
        judged = range(NIGHTS_WINDOW, NIGHTS_WINDOW + counted)
        if confirm == 1:
            return sum(bool(reds(i, k, center)) for i in judged) / counted
        return sum(bool(reds(i, k, center) & reds(i - 1, k, center)) for i in judged) / counted

    def caught(episode: Episode, k: float, center: str, confirm: int) -> bool:
        window = every[episode.start : episode.start + NIGHTS_WINDOW]
        one = {c for c in red_cells(episode.first, window, k, center) if c[0] == DECODE_SERVER}
        if confirm == 1:
            return bool(one)
        return bool(one & red_cells(episode.second, [*window[1:], episode.first], k, center))

    def plugin_red(c: Cells) -> bool:
        return any(server == DECODE_SERVER for server, _ in c.red)

    judged = range(NIGHTS_WINDOW, NIGHTS_WINDOW + counted)
    episodes = outcome.episodes
    return Rates(
        plugin_unchanged=sum(bool(every[i].red) for i in judged) / counted,
        plugin_flagged=sum(e.flagged for e in episodes) / len(episodes),
        plugin_red=sum(plugin_red(e.first) or plugin_red(e.second) for e in episodes) / len(episodes),
        candidate_unchanged={(c, k, n): unchanged_red(k, c, n) for c, k, n in CANDIDATES},
        candidate_red={(c, k, n): sum(caught(e, k, c, n) for e in episodes) / len(episodes) for c, k, n in CANDIDATES},
    )


def cell(values: Sequence[float]) -> str:
    """A rate's mean over recordings with its 10th-90th percentile, in percent."""
    s = spread(values)
    return f"{s.mean:6.1%} [{100 * s.p10:.0f}-{100 * s.p90:.0f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recordings", type=int, default=20)
    parser.add_argument("--nights", type=int, default=20, help="unchanged nights judged per recording (default 20)")
    parser.add_argument(
        "--episodes", type=int, default=8, help="episodes of the drop per recording, two nights each (default 8)"
    )
    parser.add_argument("--confirm", type=int, default=2, help="the plugin's --llmperf-confirm (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the figures do not depend on it)")
    parser.add_argument("--params", type=Path, default=PARAMS)
    parser.add_argument("--double", action="store_true", help="every noise figure of the parameters file doubled")
    parser.add_argument("--save", type=Path, help="keep the nights' cells in this file (pickle), to judge again")
    parser.add_argument("--load", type=Path, help="judge the cells a --save kept, running no night")
    args = parser.parse_args(argv)
    for name in ("recordings", "nights", "episodes", "jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    started = time.monotonic()
    if args.load:
        with args.load.open("rb") as kept:
            args.recordings, args.nights, outcomes = pickle.load(kept)
    else:
        outcomes = run_nights(args, started)
    if args.save:
        with args.save.open("wb") as keep:
            pickle.dump((args.recordings, args.nights, outcomes), keep)
    rows = [rates(outcomes[r], args.nights) for r in range(args.recordings)]
    print()
    print(
        f"steady decode cells alone; each rate the mean over {args.recordings} recordings [10th-90th percentile]; "
        f"the candidate reads a cell red below -{TOLERANCE:.0%} and below -k standard deviations of its last "
        f"{NIGHTS_WINDOW} nights' residuals, measured from the baseline's level or from their median"
    )
    print(f"{'rule':<52} {'unchanged nights red':>20} {'the drop red':>22}")
    print(
        f"{'the plugin (history, --llmperf-confirm 2)':<52} {cell([x.plugin_unchanged for x in rows]):>20} "
        f"{cell([x.plugin_red for x in rows]):>14} within 2"
        f"   (flagged night 1: {cell([x.plugin_flagged for x in rows])})"
    )
    for key in CANDIDATES:
        center, k, confirm = key
        name = f"candidate, k {k:g}, from the {'baseline' if center == 'baseline' else 'last nights'}, {confirm} night"
        unchanged, caught = cell([x.candidate_unchanged[key] for x in rows]), cell([x.candidate_red[key] for x in rows])
        when = "on night 1" if confirm == 1 else "within 2"
        print(f"{name + ('s' if confirm > 1 else ''):<52} {unchanged:>20} {caught:>14} {when}")
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


def run_nights(args: argparse.Namespace, started: float) -> dict[int, Outcome]:
    """Every recording's nights (trial), over `args.jobs` worker processes."""
    model = NoiseModel.load(args.params, args.double)
    items = seed_items()
    servers = all_servers(items)
    drop = nights.scenarios(servers)[0].name
    options = night_options()
    dataset = load_dataset(options.dataset_name, options.dataset, nights.ROOT)
    datasets = {(options.dataset_name, options.dataset): dataset}
    seeds = [recording_seed(args.seed, r) for r in range(args.recordings)]
    print(
        f"box reference: {args.recordings} recordings, each {args.nights} unchanged nights (after {NIGHTS_WINDOW} of "
        f"warm-up) and {args.episodes} episodes of {drop} (two nights each), the whole seed suite through the "
        f"plugin's session (--llmperf-confirm {args.confirm}); "
        f"noise {args.params.name}{' doubled' if args.double else ''}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="llmperf-box-") as tmp:
        BENCHES[:] = [
            Bench(
                Path(tmp, f"recording-{r}"),
                items,
                servers,
                model,
                SeedPrompts(dataset),
                datasets,
                seed,
                args.confirm,
            )
            for r, seed in enumerate(seeds)
        ]
        for bench in BENCHES:
            bench.rootdir.mkdir()
        jobs = [(r, args.nights, args.episodes) for r in range(args.recordings)]
        outcomes: dict[int, Outcome] = {}
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for r, outcome in pool.imap_unordered(trial, jobs):
                outcomes[r] = outcome
                print(f"  recording {r + 1}/{args.recordings} done ({time.monotonic() - started:.0f} s)", flush=True)
    return outcomes


if __name__ == "__main__":
    raise SystemExit(main())
