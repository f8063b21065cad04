"""Tonight's box as a reference, tried: a candidate rule that judges each server's steady
decode against tonight's shared shift of the box, set beside the plugin's rule on the same
nights (`python benchmarks/box_reference.py`).

    python benchmarks/box_reference.py --recordings 20 --nights 20 --episodes 8 --jobs 2

The nights are nights.py's: each recording records its baselines (nights.Bench.record),
then runs NIGHTS_WINDOW nights of warm-up and `--nights` unchanged nights of the whole seed
suite through the plugin's own session (nights.night: auto repetitions, the history,
--llmperf-confirm 2), then `--episodes` first nights of one server's decode 5 % slower
(nights.py's change, its noise drawn as nights.py draws an episode's first night), each
from the history of 20 of its unchanged nights, the whole suite run so that every server
is measured. The plugin judges every night as it does; nothing of its rule is copied here.

The candidate (not in the plugin): for each steady decode cell (a server at a
concurrency), x = ln(measured / baseline), the box's shift tonight the median of the other
servers' x at that concurrency, and the residual r = x - shift. The residual's spread is the
robust standard deviation (1.4826 x MAD) of the cell's residuals over the 20 nights before;
a cell is red where r is below -3 % (the plugin's tolerance for steady decode) and below
-k spreads. The box's own shift is left to the plugin's rule (a whole image slower moves
every server alike and leaves no residual).

Prints, for the steady decode cells alone: the unchanged nights with a red decode cell
under the plugin's rule and under the candidate at several k, and the decode drop's first
nights red under each (the plugin's also flagged, and its rate within two nights from the
same episodes' second night where the first was not red is not run here: nights.py's table
has it). Equal false reds decide: the candidate earns its place where, at no more unchanged
red nights than the plugin's, it catches the drop on its first night at least 5 points more
often than the plugin does within two (nights.py's figure).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
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

METRIC = "steady_decode_tok_s"
TOLERANCE = 0.03  # the plugin's default for steady decode
KS = (2.33, 2.58, 3.09, 3.72)  # one-sided 99 %, 99.5 %, 99.9 %, 99.99 %
DROP = 0.05
SCENARIO = f"{DECODE_SERVER} decode {DROP:.0%} slower"  # nights.py's name: its episodes' noise


@dataclass(frozen=True)
class Cells:
    """One night's steady decode cells: x = ln(measured / baseline) by (server, concurrency),
    and the cells the plugin's rule read red (failing, not suspect)."""

    x: dict[tuple[str, int], float]
    red: frozenset[tuple[str, int]]


def cells(result: Night) -> Cells:
    x = {
        (g.server, g.concurrency): math.log(v.measured / v.baseline)
        for g in result.gates
        for v in g.verdicts
        if v.metric == METRIC and v.measured and v.baseline
    }
    red = frozenset((server, c) for _, server, c, metric, _ in result.failing() if metric == METRIC)
    return Cells(x, red)


def residuals(night_cells: Cells) -> dict[tuple[str, int], float]:
    """Each cell's x less the median of the other servers' x at its concurrency."""
    out = {}
    for (server, c), x in night_cells.x.items():
        others = [v for (s, k), v in night_cells.x.items() if k == c and s != server]
        if others:
            out[server, c] = x - statistics.median(others)
    return out


def candidate_red(tonight: Cells, before: Sequence[Cells], k: float, only: str | None = None) -> bool:
    """Whether the candidate reads a cell red tonight (`only`: that server's cells alone)."""
    past = [residuals(c) for c in before]
    for cell, r in residuals(tonight).items():
        if only is not None and cell[0] != only:
            continue
        series = [p[cell] for p in past if cell in p]
        if len(series) < 5:
            continue
        center = statistics.median(series)
        width = 1.4826 * statistics.median(abs(v - center) for v in series)
        if r < -TOLERANCE and width > 0 and r < -k * width:
            return True
    return False


@dataclass(frozen=True)
class Outcome:
    """A recording's nights: the unchanged ones' cells (the warm-up first), and per episode
    its first night's cells, whether the plugin flagged the changed server's steady decode
    there, and where its window of unchanged nights starts among the counted ones."""

    unchanged: list[Cells]
    episodes: list[tuple[Cells, bool, int]]


BENCHES: list[Bench] = []  # one per recording, the parent's, inherited by forked workers


def trial(job: tuple[int, int, int]) -> tuple[int, Outcome]:
    """Recording `r`: its baselines, its warm-up and `counted` unchanged nights in order (one
    history), then `episodes` first nights of the decode drop, each from a window of them."""
    r, counted, episodes = job
    bench = BENCHES[r]
    recorded = bench.record()
    if recorded.failed:
        raise RuntimeError(f"recording {r + 1} failed: {recorded.failed}")
    window = HistoryWindow(bench.rootdir / "history.jsonl")
    unchanged, lines = [], []
    for n in range(-NIGHTS_WINDOW, counted):
        noise = bench.model.night(bench.seed, f"n{n}")
        result = night(
            bench.rootdir,
            bench.items,
            bench.model,
            noise,
            bench.prompts,
            bench.datasets,
            history=window.path,
            confirm=bench.confirm,
        )
        lines.append(window.after_session())
        unchanged.append(cells(result))
    window.close()
    seen = []
    for e, start in enumerate(nights.window_starts(counted, episodes)):
        first = NIGHTS_WINDOW + start  # the window's first night among all (the warm-up first)
        window = HistoryWindow(bench.rootdir / f"history-{e}.jsonl", prior=lines[first : first + NIGHTS_WINDOW])
        noise = bench.model.night(bench.seed, f"{SCENARIO}:{e}:0")
        result = night(
            bench.rootdir,
            bench.items,
            bench.model,
            noise,
            bench.prompts,
            bench.datasets,
            changes={DECODE_SERVER: Change(step=1 / (1 - DROP))},
            history=window.path,
            confirm=bench.confirm,
        )
        window.close()
        flagged = any(s == DECODE_SERVER and m == METRIC for _, s, _, m, _ in result.flagged())
        seen.append((cells(result), flagged, first))
    return r, Outcome(unchanged, seen)


@dataclass(frozen=True)
class Rates:
    """One recording's rates, steady decode cells alone."""

    plugin_unchanged: float  # unchanged nights with a red decode cell, the plugin's rule
    plugin_red: float  # the drop's first nights with the changed server's decode red
    plugin_flagged: float  # ... red or suspect
    candidate_unchanged: dict[float, float]  # by k
    candidate_red: dict[float, float]


def rates(outcome: Outcome, counted: int) -> Rates:
    every = outcome.unchanged
    judged = range(NIGHTS_WINDOW, NIGHTS_WINDOW + counted)
    firsts = outcome.episodes
    return Rates(
        plugin_unchanged=sum(bool(every[i].red) for i in judged) / counted,
        plugin_red=sum(any(s == DECODE_SERVER for s, _ in c.red) for c, _, _ in firsts) / len(firsts),
        plugin_flagged=sum(f for _, f, _ in firsts) / len(firsts),
        candidate_unchanged={
            k: sum(candidate_red(every[i], every[i - NIGHTS_WINDOW : i], k) for i in judged) / counted for k in KS
        },
        candidate_red={
            k: sum(
                candidate_red(c, every[first : first + NIGHTS_WINDOW], k, only=DECODE_SERVER) for c, _, first in firsts
            )
            / len(firsts)
            for k in KS
        },
    )


def cell(values: Sequence[float]) -> str:
    """A rate's mean over recordings with its 10th-90th percentile, in percent."""
    s = spread(values)
    return f"{s.mean:6.1%} [{100 * s.p10:.0f}-{100 * s.p90:.0f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recordings", type=int, default=20)
    parser.add_argument("--nights", type=int, default=20, help="unchanged nights judged per recording (default 20)")
    parser.add_argument("--episodes", type=int, default=8, help="first nights of the drop per recording (default 8)")
    parser.add_argument("--confirm", type=int, default=2, help="the plugin's --llmperf-confirm (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (the figures do not depend on it)")
    parser.add_argument("--params", type=Path, default=PARAMS)
    parser.add_argument("--double", action="store_true", help="every noise figure of the parameters file doubled")
    args = parser.parse_args(argv)
    for name in ("recordings", "nights", "episodes", "jobs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    started = time.monotonic()
    model = NoiseModel.load(args.params, args.double)
    items = seed_items()
    options = night_options()
    dataset = load_dataset(options.dataset_name, options.dataset, nights.ROOT)
    datasets = {(options.dataset_name, options.dataset): dataset}
    seeds = [recording_seed(args.seed, r) for r in range(args.recordings)]
    print(
        f"box reference: {args.recordings} recordings, each {args.nights} unchanged nights (after {NIGHTS_WINDOW} of "
        f"warm-up) and {args.episodes} first nights of {SCENARIO}, the whole seed suite through the plugin's session "
        f"(--llmperf-confirm {args.confirm}); noise {args.params.name}{' doubled' if args.double else ''}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="llmperf-box-") as tmp:
        BENCHES[:] = [
            Bench(
                Path(tmp, f"recording-{r}"),
                items,
                all_servers(items),
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
    rows = [rates(outcomes[r], args.nights) for r in range(args.recordings)]
    print()
    print(
        f"steady decode cells alone; each rate the mean over {args.recordings} recordings [10th-90th percentile]; "
        f"candidate: red below -{TOLERANCE:.0%} and below -k robust spreads of the cell's last {NIGHTS_WINDOW} "
        "residuals"
    )
    print(f"{'rule':<34} {'unchanged nights red':>22} {'drop red on night 1':>22}")
    print(
        f"{'the plugin (history, confirm)':<34} {cell([x.plugin_unchanged for x in rows]):>22} "
        f"{cell([x.plugin_red for x in rows]):>22}   (flagged night 1: {cell([x.plugin_flagged for x in rows])})"
    )
    for k in KS:
        print(
            f"{f'candidate, k = {k:g}':<34} {cell([x.candidate_unchanged[k] for x in rows]):>22} "
            f"{cell([x.candidate_red[k] for x in rows]):>22}"
        )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
