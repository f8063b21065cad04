"""Plain-text verdict tables for the failure message and the terminal summary.

Failing verdicts are upper case (REGRESSED) to stand out in CI output; hints follow the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_llmperf.baselines.compare import Status, Verdict
from pytest_llmperf.metrics.registry import format_value

VERDICT_WORDS: dict[str, str] = {
    Status.PASS: "pass",
    Status.IMPROVED: "improved",
    Status.REGRESSED: "!! REGRESSED",
    Status.INCONCLUSIVE: "? inconclusive",
    Status.SUSPECT: "?! suspect",
    Status.MISSING_BASELINE: "MISSING BASELINE",
    Status.NO_DATA: "NO DATA",
    Status.INVALID: "INVALID RUN",
}

PUBLISHED_HEADER = "published (ref only)"
PUBLISHED_NOTE = (
    "published (ref only): figures from a published run, shown for context; "
    "never gating, hardware and workload may differ"
)


@dataclass(frozen=True)
class SummaryRow:
    """One line of the terminal summary: a verdict at a concurrency, maybe a published figure."""

    concurrency: int
    verdict: Verdict
    published: float | None = None


def _decimals_of(text: str) -> int:
    return len(text.split(".", 1)[1].rstrip("%")) if "." in text else 0


def _signed(x: float, decimals: int, limit: float | None, suffix: str = "") -> str:
    """`x` with a sign; when it would print the same as the limit it crossed, add digits
    (up to 4 more) so "-5.0%  REGRESSED" never appears beside "allowed -5%"."""
    text = f"{x:+.{decimals}f}"
    if limit is not None:
        for extra in range(5):
            d = decimals + extra
            text = f"{x:+.{d}f}"
            if f"{abs(x):.{d}f}" != f"{limit:.{d}f}":
                break
    return text + suffix


def format_change(v: Verdict) -> str:
    """The move, in the tolerance's own terms first: "-5.0% (-20.4)" or "-0.030 (-4.5%)"."""
    if v.change is None:
        return "-"
    tolerance = v.tolerance
    crossed = v.status in (Status.REGRESSED, Status.IMPROVED)
    limit = tolerance.limit if tolerance is not None and crossed else None  # shown where it was crossed
    is_absolute = tolerance is not None and tolerance.kind == "absolute"
    abs_decimals = _decimals_of(format_value(v.metric, v.change.absolute))
    absolute = _signed(v.change.absolute, abs_decimals, limit if is_absolute else None)
    if v.change.relative is None:
        return absolute
    rel_limit = limit * 100 if limit is not None and not is_absolute else None
    relative = _signed(v.change.relative * 100, 1, rel_limit, "%")
    if is_absolute:
        return f"{absolute} ({relative})"
    return f"{relative} ({absolute})"


def verdict_line(verdicts: Sequence[Verdict]) -> str:
    """A test's failing `verdicts` in one line (short test summary, JUnit): "decode_tok_s
    380.3 -> 330.4 (-13.1%) regressed"; an invalid run once, with its reason."""
    parts: list[str] = []
    for v in verdicts:
        if v.status == Status.INVALID:
            parts.append(v.hint.splitlines()[0] if v.hint else "invalid run")
        elif v.change is not None:
            move = format_change(v).split(" (", 1)[0]  # in the tolerance's own terms
            baseline, measured = format_value(v.metric, v.baseline), format_value(v.metric, v.measured)
            parts.append(f"{v.metric} {baseline} -> {measured} ({move}) {v.status}")
        elif v.measured is not None:
            parts.append(f"{v.metric} {format_value(v.metric, v.measured)} {v.status}")
        else:
            parts.append(f"{v.metric} {v.status}")
    return "; ".join(dict.fromkeys(parts))


def format_noise(v: Verdict) -> str:
    """The interval's half-width in the tolerance's terms: "+/-1.2%" or "+/-0.012"; "-" if none."""
    if not v.noise or v.change is None or v.tolerance is None:  # 0: no error known on either side
        return "-"
    if v.tolerance.kind == "relative":
        if not v.baseline:
            return "-"
        return f"+/-{abs(v.noise / v.baseline) * 100:.1f}%"
    decimals = max(_decimals_of(format_value(v.metric, v.noise)), 1)
    return f"+/-{abs(v.noise):.{decimals}f}"


def verdict_word(status: str) -> str:
    return VERDICT_WORDS.get(status, status.upper())


def render_columns(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(parts).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _counts(verdicts: Iterable[Verdict]) -> str:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    order = [Status.INVALID, Status.REGRESSED, Status.NO_DATA, Status.MISSING_BASELINE, Status.SUSPECT]
    order.append(Status.INCONCLUSIVE)
    order.append(Status.IMPROVED)
    order.append(Status.PASS)
    return ", ".join(f"{counts[s]} {s}" for s in order if s in counts)


_RECORD_WORDS = {
    Status.REGRESSED: "if the new level is expected and accepted, re-record {metrics} with: {command}",
    Status.MISSING_BASELINE: "no baseline for {metrics}; record it with: {command}",
    Status.IMPROVED: "{metrics} improved beyond tolerance; if this is the new normal, record it with: {command}",
}


def _hints(verdicts: Iterable[Verdict], faults: str | None = None) -> list[str]:
    """The faults, the no-data reasons, then each record command once (the rows already
    say what moved). Beside faults, a regression is not offered for re-recording."""
    verdicts = list(verdicts)
    seen: list[str] = []
    if faults:
        seen.append(
            f"faults during the run: {faults}; a change beside them may be these faults, not a "
            "slower server: fix or explain them before re-recording"
        )
    undecided = (Status.INVALID, Status.NO_DATA, Status.SUSPECT, Status.INCONCLUSIVE)
    seen += [v.hint for v in verdicts if v.status in undecided and v.hint]
    seen += [
        f"{v.metric}: {v.note}" for v in verdicts if v.note and v.status in (Status.REGRESSED, Status.INCONCLUSIVE)
    ]
    for status, words in _RECORD_WORDS.items():
        if faults and status == Status.REGRESSED:
            continue
        for command in dict.fromkeys(v.command for v in verdicts if v.status == status):
            metrics = ", ".join(v.metric for v in verdicts if v.status == status and v.command == command)
            if command:
                seen.append(words.format(metrics=metrics, command=command))
            else:  # a verdict built without a command: keep its own hint
                seen += [v.hint for v in verdicts if v.status == status and not v.command and v.hint]
    return [f"  - {h}" for h in dict.fromkeys(seen)]


COLUMNS = ["metric", "baseline", "measured", "change", "noise", "allowed", "verdict"]


def verdict_cells(v: Verdict) -> list[str]:
    """One verdict as the cells of COLUMNS (the text tables and the HTML report's)."""
    return [
        v.metric,
        format_value(v.metric, v.baseline),
        format_value(v.metric, v.measured),
        format_change(v),
        format_noise(v),
        v.allowed,
        verdict_word(v.status),
    ]


def format_verdict_table(
    verdicts: Sequence[Verdict],
    title: str | None = None,
    faults: str | None = None,
    explanation: Sequence[str] = (),
) -> str:
    """metric | baseline | measured | change | noise | allowed | verdict, then counts, the
    explanation (report/explain.py) and hints; `faults`: tolerated failures and stalls."""
    lines = [title] if title else []
    lines += render_columns(COLUMNS, [verdict_cells(v) for v in verdicts], right={1, 2, 3, 4, 5})
    if verdicts:
        lines.append(f"({_counts(verdicts)})")
    lines += explanation
    hints = _hints(verdicts, faults)
    if hints:
        lines += ["hints:", *hints]
    return "\n".join(lines)


def format_summary_table(by_server: Mapping[str, Iterable[SummaryRow]]) -> str:
    """The terminal summary's one verdict table: server, concurrency, then COLUMNS, each
    server's rows by concurrency (a name or a level not repeated below itself), then the
    counts. The published column appears only when some row has a published figure, and
    is labelled as such."""
    servers = {server: sorted(rows, key=lambda r: r.concurrency) for server, rows in by_server.items()}
    items = [r for rows in servers.values() for r in rows]  # sorted: stable, metric order kept
    with_published = any(r.published is not None for r in items)
    header = ["server", "conc", *COLUMNS, *([PUBLISHED_HEADER] if with_published else [])]
    table = []
    for server, rows in servers.items():
        previous = None
        for r in rows:
            first = r is rows[0]
            cells = [server if first else "", "" if r.concurrency == previous else str(r.concurrency)]
            cells += verdict_cells(r.verdict)
            table.append(cells + ([format_value(r.verdict.metric, r.published)] if with_published else []))
            previous = r.concurrency
    right = {1, 3, 4, 5, 6, 7} | ({9} if with_published else set())
    lines = ["llmperf verdicts:", *render_columns(header, table, right)]
    if items:
        lines.append(f"({_counts(r.verdict for r in items)})")
    if with_published:
        lines.append(PUBLISHED_NOTE)
    return "\n".join(lines)
