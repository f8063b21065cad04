"""The report's plots, drawn as SVG with matplotlib (the optional `[report]` extra).

`matplotlib.figure.Figure`, no pyplot (no global state or GUI); SVG ids are salted per plot
so inlined plots never share an id and the same document draws the same bytes. What each
plot shows comes from series.py; without matplotlib `render_plots` returns nothing and
`MISSING` says how to get them.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pytest_llmperf.capacity.search import UNITS
from pytest_llmperf.metrics.registry import DECODE, TPOT_MEDIAN
from pytest_llmperf.report import series
from pytest_llmperf.report.series import Doc

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MISSING = "plots need matplotlib: pip install 'pytest-llmperf[report]'"

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


@dataclass(frozen=True)
class Plot:
    name: str  # file stem: plots/<name>.svg
    title: str
    caption: str
    svg: str  # the SVG document, without the XML prolog


@dataclass(frozen=True)
class PlotError:
    name: str
    error: str


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "plot"


def _svg(figure: Figure, name: str) -> str:
    import io

    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": name, "svg.fonttype": "none"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # the prolog and DOCTYPE do not belong inline


def _figure(width: float = 7.5, height: float = 3.6, cols: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, cols, squeeze=False)[0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
    return figure, list(axes)


def _concurrency_axis(ax: Axes, levels: list[int]) -> None:
    if levels and max(levels) / max(min(levels), 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(levels)), [str(c) for c in sorted(set(levels))])
    ax.set_xlabel("concurrency")


def _metric_panel(ax: Axes, lines: list[series.Series], ylabel: str) -> None:
    levels: list[int] = []
    for i, s in enumerate(lines):
        color = COLORS[i % len(COLORS)]
        label = s.server + (" (speculative)" if s.speculative else "")
        if s.measured:
            xs, ys = zip(*s.measured)
            ax.plot(xs, ys, "o-", color=color, label=label)
            levels += xs
        if s.baseline:
            xs, ys, noise = zip(*s.baseline)
            ax.errorbar(
                xs,
                ys,
                yerr=noise,
                fmt="s--",
                mfc="none",
                color=color,
                alpha=0.8,
                capsize=4,
                label=f"{s.server} baseline",
            )
            ax.fill_between(
                xs, [y - n for y, n in zip(ys, noise)], [y + n for y, n in zip(ys, noise)], color=color, alpha=0.15
            )
            levels += xs
        if s.published:
            xs, ys = zip(*s.published)
            ax.plot(xs, ys, "*", color=color, markersize=13, markeredgecolor="black", label=f"{s.server} published")
            levels += xs
    _concurrency_axis(ax, levels)
    ax.set_ylabel(ylabel)


def plot_decode_and_tpot(doc: Doc, model: str, runs: list[Doc]) -> Plot | None:
    decode = series.concurrency_series(doc, runs, DECODE)
    tpot = series.concurrency_series(doc, runs, TPOT_MEDIAN)
    if not decode and not tpot:
        return None
    figure, (left, right) = _figure(11, 4.2, cols=2)
    _metric_panel(left, decode, "decode tok/s (aggregate)")
    _metric_panel(right, tpot, "TPOT median (ms)")
    left.set_title("decode throughput")
    right.set_title("time per output token")
    handles, labels = left.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3, fontsize="small")
    figure.suptitle(model)
    name = f"decode_tpot_{_slug(model)}"
    caption = (
        "Measured medians per concurrency (solid), the baseline (hollow squares, dashed) with its noise band (error "
        "bars: the verdict's interval half-width at the rule's confidence) and the published figures (stars: "
        "report-only)."
    )
    return Plot(name, f"Decode tok/s and TPOT vs concurrency: {model}", caption, _svg(figure, name))


def plot_speedup(doc: Doc, model: str, runs: list[Doc]) -> Plot | None:
    points = series.speedups(doc, runs)
    if not points:
        return None
    figure, (ax,) = _figure()
    levels: list[int] = []
    for i, (server, rows) in enumerate(points.items()):
        color = COLORS[i % len(COLORS)]
        measured = [(p.concurrency, p.measured, p.noise or 0.0) for p in rows if p.measured is not None]
        if measured:
            xs, ys, err = zip(*measured)
            ax.errorbar(xs, ys, yerr=err, fmt="o-", color=color, capsize=4, label=f"{server} / base")
        baseline = [(p.concurrency, p.baseline) for p in rows if p.baseline is not None]
        if baseline:
            xs2, ys2 = zip(*baseline)
            ax.plot(xs2, ys2, "s--", color=color, alpha=0.6, label="baseline")
        published = [(p.concurrency, p.published) for p in rows if p.published is not None]
        if published:
            xs3, ys3 = zip(*published)
            ax.plot(xs3, ys3, "*", color=color, markersize=13, markeredgecolor="black", label="published")
        levels += [p.concurrency for p in rows]
    ax.axhline(1.0, color="black", linewidth=0.8)
    _concurrency_axis(ax, levels)
    ax.set_ylabel("MTP speedup (x)")
    ax.set_title(f"MTP speedup: {model}")
    ax.legend(fontsize="small")
    name = f"speedup_{_slug(model)}"
    caption = (
        "Speculative decode tok/s over the base server's, same workload; error bars: the speedup verdict's "
        "interval half-width (none where no test gated the speedup); 1.0 = no gain."
    )
    return Plot(name, f"MTP speedup per concurrency: {model}", caption, _svg(figure, name))


def plot_acceptance(item: series.Acceptance) -> Plot:
    figure, (ax,) = _figure()
    levels = sorted(item.measured)
    width = 0.8 / max(len(levels), 1)
    positions = list(range(1, item.positions + 1))
    for j, c in enumerate(levels):
        color = COLORS[j % len(COLORS)]
        xs = [p - 0.4 + width * (j + 0.5) for p in positions]
        measured = [v if v is not None else 0.0 for v in item.measured[c]]
        ax.bar(xs, measured, width * 0.9, color=color, label=f"concurrency {c}")
        base = [(x, v) for x, v in zip(xs, item.baseline.get(c, [])) if v is not None]
        if base:
            bx, by = zip(*base)
            ax.plot(bx, by, "_", color="black", markersize=18, markeredgewidth=2.5)
        published = [(x, v) for x, v in zip(xs, item.published.get(c, [])) if v is not None]
        if published:
            px, py = zip(*published)
            ax.plot(px, py, "*", color=color, markersize=12, markeredgecolor="black")
    ax.plot([], [], "_", color="black", markersize=18, markeredgewidth=2.5, label="baseline")
    if any(v is not None for vs in item.published.values() for v in vs):
        ax.plot([], [], "*", color="grey", markersize=12, markeredgecolor="black", label="published")
    ax.set_xticks(positions, [f"position {p}" for p in positions])
    ax.set_ylim(0, 1)
    ax.set_ylabel("accepted / drafts")
    ax.set_title(f"per-position acceptance: {item.server}")
    ax.legend(fontsize="small")
    name = f"acceptance_{_slug(item.server)}"
    caption = "Share of drafts whose token at each position was accepted; bars measured, black ticks the baseline."
    return Plot(name, f"Per-position acceptance: {item.server}", caption, _svg(figure, name))


def _cdf(ax: Axes, values: list[float], color: str, label: str) -> None:
    ordered = sorted(values)
    n = len(ordered)
    ax.step(ordered, [(i + 1) / n for i in range(n)], where="post", color=color, label=label)


def plot_latency_cdfs(server: str, runs: list[Doc]) -> Plot | None:
    cells = [(series.concurrency_of(r), *series.latencies(r)) for r in sorted(runs, key=series.concurrency_of)]
    cells = [cell for cell in cells if cell[1] or cell[2]]
    if not cells:
        return None
    figure, (left, right) = _figure(11, 3.8, cols=2)
    for j, (c, ttfts, tpots) in enumerate(cells):
        color = COLORS[j % len(COLORS)]
        if ttfts:
            _cdf(left, ttfts, color, f"concurrency {c} ({len(ttfts)})")
        if tpots:
            _cdf(right, tpots, color, f"concurrency {c} ({len(tpots)})")
    left.set_xlabel("TTFT (ms)")
    right.set_xlabel("TPOT (ms)")
    left.set_ylabel("share of requests")
    left.set_xscale("log")
    left.legend(fontsize="small")
    figure.suptitle(f"per-request latency: {server}")
    name = f"latency_{_slug(server)}"
    caption = "Cumulative distribution of each request's TTFT and TPOT, one line per concurrency (requests)."
    return Plot(name, f"TTFT and TPOT distributions: {server}", caption, _svg(figure, name))


def plot_timeline(item: series.Timeline) -> Plot:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4.2), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True)
    xs, ys = zip(*item.in_flight)
    top.step(xs, ys, where="post", color=COLORS[0])
    top.set_ylabel("requests in flight")
    top.grid(True, alpha=0.3)
    bx, by = zip(*item.tokens)
    bottom.bar(bx, by, width=item.bin_s, align="edge", color=COLORS[2])
    bottom.set_ylabel("output tok/s")
    bottom.set_xlabel("seconds since the first request (real time)")
    bottom.grid(True, alpha=0.3)
    figure.suptitle(f"timeline: {item.server} @ concurrency {item.concurrency} (first repetition)")
    name = f"timeline_{_slug(item.server)}_c{item.concurrency}"
    caption = (
        f"Requests in flight and output tokens per second ({item.bin_s:.2f} s bins) over one run: a stall, a "
        "cold start or a slow tail shows here."
    )
    return Plot(name, f"Timeline: {item.server} @ concurrency {item.concurrency}", caption, _svg(figure, name))


_OUTCOME_MARKS = {"met": ("o", COLORS[0]), "broken": ("X", COLORS[1]), "undecided": ("D", COLORS[7])}


def _knee_panel(ax: Axes, knee: series.Knee) -> None:
    if knee.baseline_probes:
        bx, by = zip(*[(load, value) for load, value, _ in knee.baseline_probes])
        ax.plot(bx, by, ":", marker=".", color=COLORS[7], label="baseline's probes")
    xs = [load for load, _, _ in knee.probes]
    if xs:
        ax.plot(xs, [value for _, value, _ in knee.probes], "-", color=COLORS[0], alpha=0.6)
    for outcome, (marker, color) in _OUTCOME_MARKS.items():
        points = [(load, value) for load, value, said in knee.probes if said == outcome]
        if points:
            px, py = zip(*points)
            ax.plot(px, py, marker, color=color, linestyle="none", markersize=7, label=f"probe {outcome}")
    ax.axhline(knee.limit_ms, color="black", linestyle="--", linewidth=1.0, label=f"SLO {knee.limit_ms:g} ms")
    if knee.capacity is not None:
        ax.axvline(knee.capacity, color=COLORS[2], linewidth=1.5, label=f"capacity {knee.capacity:g}")
    if knee.baseline_capacity is not None:
        ax.axvline(
            knee.baseline_capacity,
            color=COLORS[7],
            linestyle=":",
            linewidth=1.5,
            label=f"baseline capacity {knee.baseline_capacity:g}",
        )
    ax.set_xlabel(f"{knee.over} ({UNITS.get(knee.over, 'load')})")
    ax.set_ylabel(f"{knee.label} (ms)")
    ax.set_title(knee.label + (" (broken first)" if knee.first_broken else ""))
    ax.legend(fontsize="small")


def plot_knee(knees: list[series.Knee]) -> Plot:
    """One capacity search: each SLO's value at every load probed, its limit and the capacity."""
    first = knees[0]
    figure, axes = _figure(5.5 * len(knees), 3.8, cols=len(knees))
    for ax, knee in zip(axes, knees):
        _knee_panel(ax, knee)
    figure.suptitle(f"capacity: {first.server} ({first.test})")
    name = knee_name(first)
    caption = (
        "Each SLO's value at every load the capacity search probed (circles met, crosses broken, diamonds "
        "undecided), the SLO's limit (dashed), the capacity found (solid) and the baseline's (dotted, where "
        "the capacity was judged against one)."
    )
    return Plot(name, f"Capacity knee: {first.server} ({first.test})", caption, _svg(figure, name))


def knee_name(knee: series.Knee) -> str:
    return f"knee_{_slug(knee.server)}_{_slug(knee.test)}"


def _jobs(doc: Doc) -> Iterator[tuple[str, Callable[[], Plot | None]]]:
    for model, runs in series.by_model(doc).items():
        yield f"decode_tpot_{_slug(model)}", partial(plot_decode_and_tpot, doc, model, runs)
        yield f"speedup_{_slug(model)}", partial(plot_speedup, doc, model, runs)
    for item in series.acceptance(doc):
        yield f"acceptance_{_slug(item.server)}", partial(plot_acceptance, item)
    by_server: dict[str, list[Doc]] = {}
    for run in doc.get("runs", []):
        by_server.setdefault(series.server_name(run), []).append(run)
    for server, server_runs in by_server.items():
        yield f"latency_{_slug(server)}", partial(plot_latency_cdfs, server, server_runs)
    for run in series.timeline_runs(doc):
        line = series.timeline(run)
        if line is not None:
            yield f"timeline_{_slug(line.server)}", partial(plot_timeline, line)
    searches: dict[tuple[str, str], list[series.Knee]] = {}
    for knee in series.knees(doc):
        searches.setdefault((knee.test, knee.server), []).append(knee)
    for knees in searches.values():
        yield knee_name(knees[0]), partial(plot_knee, knees)


def render_plots(doc: Mapping[str, Any]) -> tuple[list[Plot], list[PlotError]]:
    """Every plot the document has data for, and the ones that failed to draw (a plot
    must not cost the session its report); ([], []) without matplotlib."""
    if not available():
        return [], []
    plots: list[Plot] = []
    errors: list[PlotError] = []
    for name, draw in _jobs(doc):
        try:
            plot = draw()
        except Exception as exc:  # noqa: BLE001 - shown in the report, which still comes out
            errors.append(PlotError(name, f"{type(exc).__name__}: {exc}"))
            continue
        if plot is not None:
            plots.append(plot)
    return plots, errors
