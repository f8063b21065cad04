"""RunResult: one measured run, its raw records and /metrics pages, from which every
figure is recomputed (a result written to JSON too)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmperf.metrics.records import RequestRecord
from pytest_llmperf.metrics.registry import COMPLETED, DURATION, FAILED

if TYPE_CHECKING:  # pragma: no cover
    from pytest_llmperf.metrics.concurrency import Reached
    from pytest_llmperf.metrics.crosscheck import TokenAccount
    from pytest_llmperf.metrics.prometheus import SpecDecodeStats
    from pytest_llmperf.metrics.summary import Summary

ALL_SENT = "completed"  # the stop reason of a run that sent every prompt it had
STOP_REASONS = (ALL_SENT, "max_seconds", "interrupted")

# The JSON file's identity; from_dict refuses anything else.
JSON_FORMAT = "pytest-llmperf/run-result"
JSON_VERSION = 1

_REQUIRED_KEYS = ("config", "records", "duration", "attempted", "stop_reason")


@dataclass
class RunResult:
    config: dict[str, Any]  # the workload (RunConfig as a dict, dataset, seed)
    records: list[RequestRecord]  # measured requests only (warm-up excluded)
    duration: float  # first dispatch to last completion, seconds
    attempted: int  # requests sent in the measured window
    stop_reason: str  # one of STOP_REASONS
    metrics_before: str | None = None  # raw /metrics text before the window (None: no /metrics)
    metrics_after: str | None = None  # raw /metrics text after the window
    started_at: str = ""  # ISO-8601 wall-clock time of the first dispatch
    provenance: dict[str, Any] = field(default_factory=dict)
    clock_speed: float = 1.0  # the server clock's speed-up: records on it, figures in real time
    client_lag: dict[str, float] | None = None  # dispatch.LagProbe's figures; None: not probed
    warmup: dict[str, float] | None = None  # warmup_record's figures; None without a warm-up
    running: list[list[float | None]] | None = None  # server_probe.py's samples; None: not sampled

    @property
    def partial(self) -> bool:
        return self.stop_reason == "interrupted"

    @property
    def completed(self) -> int:
        return sum(1 for r in self.records if r.ok)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.records if not r.ok)

    # ------------------------------------------------------------------ figures

    def spec_decode(self) -> SpecDecodeStats:
        """Spec-decode figures from the raw /metrics pages (never raises on a bad page)."""
        from pytest_llmperf.metrics.prometheus import SpecDecodeStats, spec_decode_delta

        generated = sum(r.completion_tokens or 0 for r in self.records if r.ok)
        try:
            return spec_decode_delta(self.metrics_before, self.metrics_after, generated_tokens=generated)
        except ValueError as exc:
            return SpecDecodeStats("unparseable", f"could not read the captured /metrics pages: {exc}")

    def engine_lag(self) -> float | None:
        """The simulator's engine lag over the window (metrics/prometheus.py), None elsewhere."""
        from pytest_llmperf.metrics.prometheus import engine_lag_delta

        try:
            return engine_lag_delta(self.metrics_before, self.metrics_after)
        except ValueError:
            return None

    def client_lag_share(self) -> float | None:
        """The client's trimmed mean event-loop lag over the run's median chunk gap (0.5:
        chunks timestamped half a gap late on average); None without either."""
        gaps = [g for r in self.records if r.ok for g in r.itls]
        if not self.client_lag or not gaps:
            return None
        median = statistics.median(gaps)
        lag = self.client_lag.get("trimmed_mean_s", self.client_lag["mean_s"])
        return lag / median if median > 0 else None

    def burst_share(self) -> float | None:
        """The share of inner chunk gaps that are 0: chunks read already buffered (a proxy,
        a late client), whose times say nothing. None with no stream of four chunks."""
        gaps = [g for r in self.records if r.ok for g in r.itls[1:-1]]
        if not gaps:
            return None
        return sum(1 for g in gaps if g <= 0.0) / len(gaps)

    def warmup_figures(self) -> dict[str, float | None] | None:
        """The warm-up's own figures in real time (warmup_figures), None without one."""
        return warmup_figures(self.warmup, self.clock_speed)

    def concurrency_reached(self) -> Reached | None:
        """The server's running gauge against the run's concurrency; None where not sampled."""
        from pytest_llmperf.metrics.concurrency import reached
        from pytest_llmperf.metrics.failures import stalls

        stalled = stalls(self.records, self.clock_speed).streams
        return reached(self.running, int(self.config.get("concurrency") or 1), self.attempted, stalled)

    def token_account(self) -> TokenAccount | None:
        """The run's output tokens counted three ways (metrics/crosscheck.py), or None."""
        from pytest_llmperf.metrics.crosscheck import token_account

        max_tokens = self.config.get("max_tokens")
        return token_account(
            self.records,
            self.metrics_before,
            self.metrics_after,
            chat=self.config.get("endpoint") == "chat",
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        )

    def summary(self) -> Summary:
        """Every aggregate in real time, recomputed from the raw records and /metrics pages."""
        from pytest_llmperf.metrics.summary import summarize

        concurrency = self.config.get("concurrency")
        return summarize(
            self.records,
            self.duration,
            self.spec_decode(),
            clock_speed=self.clock_speed,
            concurrency=concurrency if isinstance(concurrency, int) else None,
            slos=str(self.config.get("slos") or ""),
        )

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        """Raw data plus the summary (for readers); from_dict recomputes the summary."""
        summary = self.summary()
        return {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "config": dict(self.config),
            "records": [r.to_dict() for r in self.records],
            "duration": self.duration,
            "attempted": self.attempted,
            "stop_reason": self.stop_reason,
            "metrics_before": self.metrics_before,
            "metrics_after": self.metrics_after,
            "started_at": self.started_at,
            "provenance": dict(self.provenance),
            "clock_speed": self.clock_speed,
            "summary": summary.to_dict(),
            "notes": [*summary.notes, *([summary.spec_note] if summary.spec_note else [])],
            "spec_decode": self.spec_decode().to_dict(),
            "engine_lag": self.engine_lag(),  # the simulator's; recomputed from the pages
            "client_lag": self.client_lag,
            "warmup": self.warmup,
            "warmup_figures": self.warmup_figures(),  # recomputed from warmup
            "running": self.running,
            "concurrency_reached": reached.to_dict() if (reached := self.concurrency_reached()) else None,
            "token_account": account.to_dict() if (account := self.token_account()) else None,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Deterministic JSON: sorted keys, Python's shortest round-trip float repr."""
        try:
            return json.dumps(self.to_dict(), sort_keys=True, indent=indent, allow_nan=False)
        except ValueError as exc:
            raise ValueError(f"RunResult holds a NaN or infinite number and cannot be JSON: {exc}") from exc

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        if not isinstance(d, dict):
            raise ValueError(f"a run result must be a JSON object, got {type(d).__name__}")
        if d.get("format") != JSON_FORMAT:
            raise ValueError(f"not a pytest-llmperf run result (format {d.get('format')!r}, expected {JSON_FORMAT!r})")
        if d.get("version") != JSON_VERSION:
            raise ValueError(f"run result version {d.get('version')!r} is not supported (this reads {JSON_VERSION})")
        missing = [k for k in _REQUIRED_KEYS if k not in d]
        if missing:
            raise ValueError(f"run result is missing {missing}")
        if d["stop_reason"] not in STOP_REASONS:
            raise ValueError(f"run result stop_reason {d['stop_reason']!r} is not one of {STOP_REASONS}")
        duration = d["duration"]
        if not isinstance(duration, (int, float)) or isinstance(duration, bool) or not math.isfinite(duration):
            raise ValueError(f"run result duration {duration!r} is not a number of seconds")
        try:
            records = [RequestRecord.from_dict(r) for r in d["records"]]
        except TypeError as exc:
            raise ValueError(f"run result has a malformed request record: {exc}") from exc
        return cls(
            config=dict(d["config"]),
            records=records,
            duration=float(duration),
            attempted=int(d["attempted"]),
            stop_reason=d["stop_reason"],
            metrics_before=d.get("metrics_before"),
            metrics_after=d.get("metrics_after"),
            started_at=d.get("started_at", ""),
            provenance=dict(d.get("provenance") or {}),
            clock_speed=_clock_speed(d.get("clock_speed", 1.0)),
            client_lag=d.get("client_lag"),
            warmup=d.get("warmup"),
            running=d.get("running"),
        )

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"run result is not valid JSON: {exc}") from exc
        return cls.from_dict(data)


def warmup_record(records: list[RequestRecord], start: float) -> dict[str, float]:
    """A warm-up's raw figures (its records are not kept), on the records' clock."""
    ends = [r.end_time for r in records if r.end_time is not None]
    done = [r for r in records if r.ok]
    return {
        "requests": len(records),
        COMPLETED: len(done),
        FAILED: len(records) - len(done),
        "output_tokens": sum(r.completion_tokens or 0 for r in done),
        "duration": max(ends) - start if ends else 0.0,
    }


def warmup_figures(raw: dict[str, float] | None, clock_speed: float = 1.0) -> dict[str, float | None] | None:
    """`raw` (warmup_record's) in real time, with output_tok_s."""
    if not raw:
        return None
    duration = float(raw.get("duration", 0.0)) * clock_speed
    tokens = float(raw.get("output_tokens", 0))
    return {
        "requests": raw.get("requests"),
        COMPLETED: raw.get(COMPLETED),
        FAILED: raw.get(FAILED),
        DURATION: duration,
        "output_tok_s": tokens / duration if duration > 0 else None,
    }


def describe_warmup(figures: dict[str, Any]) -> str:
    """A warm-up's figures in words: "64 requests in 12.3 s, 310.2 output tok/s"."""
    tok_s = figures.get("output_tok_s")
    failed = f", {figures[FAILED]} failed" if figures.get(FAILED) else ""
    rate = f", {tok_s:.1f} output tok/s" if tok_s else ""
    return f"{plural(figures.get('requests'), 'request')} in {figures.get(DURATION) or 0:.1f} s{rate}{failed}"


def plural(count: Any, noun: str) -> str:
    """ "1 request", "4 requests" (a count that is not exactly 1 takes the plural)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _clock_speed(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"run result clock_speed {value!r} is not a positive number")
    return float(value)
