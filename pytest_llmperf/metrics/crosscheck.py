"""The figures the cross-checks judge (docs/verdicts.md): a run's output tokens counted
three ways (usage, the engine's generation counter over the measured window, the token
events received), and each completed request's output as a line (index, finish, text hash).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.metrics.prometheus import GENERATION_TOKENS, parse_snapshot
from pytest_llmperf.metrics.records import RequestRecord

# How far the counter may miss what it should hold (the counts agree exactly on vLLM and
# the simulator; the slack absorbs a stray token, not a different workload).
TOKEN_SLACK_SHARE = 0.005
TOKEN_SLACK_MIN = 2

HASH_CHARS = 12  # 48 bits of sha256: a collision among a run's prompts is out of reach

OutputRow = tuple[int, str, str]  # prompt index, finish reason ("-": none), text hash


def token_events(record: RequestRecord, chat: bool) -> int:
    """The token events of one request: its chunks, less chat's role-only first chunk."""
    chunks = len(record.chunk_times)
    return max(0, chunks - 1) if chat else chunks


@dataclass(frozen=True)
class TokenAccount:
    """One run's output tokens counted three ways (see the module's docstring)."""

    usage: int  # completion tokens in usage, over the requests that had one
    events: int  # token events received by those requests
    events_over: int  # token events beyond usage, summed over requests (each event >= 1 token)
    counter: float | None  # delta of vllm:generation_tokens_total; None: not readable or not moving
    unreported: int  # requests without usage (failed, or cut at the time cap)
    unreported_low: int  # token events those received: tokens they generated at least
    unreported_high: int | None  # max_tokens each: the most they generated; None: unknown

    @property
    def slack(self) -> float:
        return max(TOKEN_SLACK_MIN, TOKEN_SLACK_SHARE * self.usage)

    @property
    def counter_low(self) -> float:
        """The least the counter should hold: usage and the unreported requests' events."""
        return self.usage + self.unreported_low

    @property
    def counter_high(self) -> float | None:
        """The most the counter should hold (None: no bound, a request's max_tokens unknown)."""
        return None if self.unreported_high is None else self.usage + self.unreported_high

    @property
    def counter_off(self) -> bool:
        """The counter lies outside what usage and the unreported requests allow."""
        if self.counter is None:
            return False
        high = self.counter_high
        return self.counter < self.counter_low - self.slack or (high is not None and self.counter > high + self.slack)

    @property
    def usage_short(self) -> bool:
        """Usage counted fewer tokens than the client received token events."""
        return self.events_over > self.slack

    def to_dict(self) -> dict[str, Any]:
        return {
            "usage": self.usage,
            "events": self.events,
            "events_over": self.events_over,
            "counter": self.counter,
            "unreported": self.unreported,
            "unreported_low": self.unreported_low,
            "unreported_high": self.unreported_high,
            "slack": self.slack,
        }


def generation_delta(before: str | None, after: str | None) -> float | None:
    """The delta of vllm:generation_tokens_total between two pages; None when a page is
    missing or unreadable, the counter absent (not vLLM), or went backwards (a restart)."""
    if before is None or after is None:
        return None
    try:
        first, last = parse_snapshot(before), parse_snapshot(after)
    except ValueError:
        return None
    end = last.get(GENERATION_TOKENS)
    if end is None:
        return None
    delta = end - (first.get(GENERATION_TOKENS) or 0.0)
    return delta if delta >= 0 else None


def token_account(
    records: Sequence[RequestRecord],
    before: str | None,
    after: str | None,
    *,
    chat: bool,
    max_tokens: int | None,
) -> TokenAccount | None:
    """The run's token account, or None without a request with a usage; a counter that
    never moved (stats disabled) is left out as unknown."""
    reported = [r for r in records if r.ok and r.completion_tokens is not None]
    if not reported:
        return None
    usage = sum(int(r.completion_tokens or 0) for r in reported)
    counts = [(token_events(r, chat), int(r.completion_tokens or 0)) for r in reported]
    unreported = [r for r in records if not (r.ok and r.completion_tokens is not None)]
    counter = generation_delta(before, after)
    if counter == 0 and usage > 0:
        counter = None  # a frozen counter: stats are off, not a mismatch
    return TokenAccount(
        usage=usage,
        events=sum(events for events, _ in counts),
        events_over=sum(max(0, events - tokens) for events, tokens in counts),
        counter=counter,
        unreported=len(unreported),
        unreported_low=sum(token_events(r, chat) for r in unreported),
        unreported_high=None if max_tokens is None else max_tokens * len(unreported),
    )


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def output_rows(records: Iterable[RequestRecord]) -> list[OutputRow]:
    """The completed requests' output lines, in dispatch order."""
    done = sorted((r for r in records if r.ok and r.chunk_times), key=lambda r: r.send_time)
    return [(int(r.index), r.finish_reason or "-", text_hash(r.output_text)) for r in done]


def encode_outputs(rows: Sequence[OutputRow]) -> list[str]:
    """One line per request ("17 stop 3f2a9c1b0d4e"), for a diffable baseline file."""
    return [f"{i} {finish} {digest}" for i, finish, digest in rows]


def decode_outputs(lines: Sequence[Any]) -> list[OutputRow]:
    """The inverse of encode_outputs; ValueError names the bad line."""
    rows = []
    for n, line in enumerate(lines):
        parts = str(line).split()
        if len(parts) != 3 or not parts[0].isdigit() or len(parts[2]) != HASH_CHARS:
            raise ValueError(
                f"output line {n} {line!r}: expected a prompt index, a finish reason and a {HASH_CHARS}-character hash"
            )
        try:
            int(parts[2], 16)
        except ValueError:
            raise ValueError(f"output line {n} {line!r}: the hash is not hexadecimal") from None
        rows.append((int(parts[0]), parts[1], parts[2]))
    return rows


def token_mismatch(account: TokenAccount | None) -> str | None:
    """Why a run's output tokens cannot be trusted, with the three counts; None when they agree."""
    if account is None or not (account.counter_off or account.usage_short):
        return None
    counter = "not read" if account.counter is None else f"+{account.counter:,.0f} over the window"
    numbers = (
        f"usage {account.usage:,} output tokens, vllm:generation_tokens_total {counter}, "
        f"the client {account.events:,} token events (at least one token each)"
    )
    if account.unreported:
        high = account.counter_high
        numbers += (
            f"; {account.unreported} request(s) without usage (failed or cut at the cap) received "
            f"{account.unreported_low:,} token events, so the counter should read {account.counter_low:,.0f}"
            + (f" to {high:,.0f}" if high is not None else " or more")
        )
    bound = f"bound {TOKEN_SLACK_SHARE:.1%} of usage, at least {TOKEN_SLACK_MIN} tokens"
    if account.usage_short:
        what = (
            f"usage counted {account.events_over:,} tokens fewer than the token events received ({bound}): "
            "the server's usage under-reports, so every token figure is low; fix the server's usage (or a "
            "proxy in between that rewrites it)"
        )
    elif account.counter is not None and account.counter < account.counter_low:
        what = (
            f"the engine's counter holds fewer tokens than usage reports ({bound}): usage over-reports (every "
            "token figure is high) or the counter misses some; check the server's usage and its /metrics "
            "(a proxy in between that rewrites usage, or a /metrics of another server)"
        )
    else:
        what = (
            f"the engine generated more tokens than the requests report ({bound}): another client used the "
            "server during the run, or usage under-reports; measure on a server nobody else uses"
        )
    return f"output tokens disagree: {numbers}: {what}; figures that rest on usage judge nothing here"
