"""What a run is asked to do (`RunConfig`, recorded in its result) and how the measuring
client goes about it (`RunTuning`, never recorded); both picklable for worker processes."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from pytest_llmperf.metrics.goodput import SLOError, canonical_slos
from pytest_llmperf.util.secrets import REDACTED
from pytest_llmperf.workload.client import ENDPOINTS

GRACE_SECONDS = 30.0  # after a run's time cap, how long requests in flight get before they are cut


@dataclass
class RunConfig:
    concurrency: int = 1
    num_prompts: int | None = None  # None: every request given
    max_seconds: float | None = None  # None: no time cap
    max_tokens: int | None = 256  # None: each prompt's expected_output_len
    warmup_requests: int = 1
    endpoint: str = "completions"  # "completions" | "chat"
    request_rate: float = math.inf  # requests/s; inf sends as fast as concurrency allows
    burstiness: float = 1.0  # gamma shape of the arrival gaps; 1 = Poisson
    seed: int = 0  # for the arrival gaps
    ignore_eos: bool = False
    api_key: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 300.0  # longest silence between bytes of one response
    grace_seconds: float = GRACE_SECONDS  # after max_seconds, in-flight requests get this long
    progress: bool = True  # a progress line on stderr for runs over a few seconds
    label: str = ""  # what the progress line names (the server and concurrency)
    workers: int = 1  # client processes sharing the streams (one is enough for hundreds)
    slos: str = ""  # goodput SLOs ('ttft:500 tpot:50'); they judge the records, not how they are sent

    def __post_init__(self) -> None:
        def bad(name: str, fix: str) -> ValueError:
            return ValueError(f"RunConfig.{name}={getattr(self, name)!r} is invalid: {fix}")

        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        if not is_int(self.concurrency) or self.concurrency < 1:
            raise bad("concurrency", "use an integer >= 1")
        if self.num_prompts is not None and (not is_int(self.num_prompts) or self.num_prompts < 1):
            raise bad("num_prompts", "use an integer >= 1, or None for all requests")
        if self.max_seconds is not None and not (
            isinstance(self.max_seconds, (int, float)) and 0 < self.max_seconds < math.inf
        ):
            raise bad("max_seconds", "use a number of seconds > 0, or None for no time cap")
        if self.max_tokens is not None and (not is_int(self.max_tokens) or self.max_tokens < 1):
            raise bad("max_tokens", "use an integer >= 1, or None for each prompt's expected length")
        if not is_int(self.warmup_requests) or self.warmup_requests < 0:
            raise bad("warmup_requests", "use an integer >= 0")
        if self.endpoint not in ENDPOINTS:
            raise bad("endpoint", f"use one of {sorted(ENDPOINTS)}")
        if not isinstance(self.request_rate, (int, float)) or not self.request_rate > 0:
            raise bad("request_rate", "use requests per second > 0, or math.inf for no pacing")
        if not isinstance(self.burstiness, (int, float)) or not 0 < self.burstiness < math.inf:
            raise bad("burstiness", "use a finite number > 0 (1.0 is a Poisson process)")
        for name in ("connect_timeout", "read_timeout"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise bad(name, "use a finite number of seconds > 0")
        if not isinstance(self.grace_seconds, (int, float)) or not 0 <= self.grace_seconds < math.inf:
            raise bad("grace_seconds", "use a finite number of seconds >= 0")
        if not is_int(self.workers) or not 1 <= self.workers <= self.concurrency:
            raise bad("workers", "use an integer from 1 to concurrency")
        try:
            self.slos = canonical_slos(self.slos)
        except SLOError as exc:
            raise bad("slos", str(exc)) from None

    def as_dict(self) -> dict[str, Any]:
        """asdict, with the API key redacted (results are written to files)."""
        d = asdict(self)
        if not d["slos"]:
            del d["slos"]  # results without SLOs read as before (and compare with older ones)
        if d["api_key"]:
            d["api_key"] = REDACTED
        for k in ("request_rate", "burstiness"):
            if isinstance(d[k], float) and math.isinf(d[k]):
                d[k] = "inf"  # JSON has no infinity
        return d


@dataclass(frozen=True)
class RunTuning:
    """How the measuring client works, not what it measures (never recorded); tests change
    the defaults to reach paths a real run reaches only at scale."""

    defer_decode_bytes: int = 512 * 1024 * 1024  # past this, each body is decoded as its stream ends
    progress_quiet_seconds: float = 3.0  # runs shorter than this print no progress line
    progress_interval: float | None = None  # None: `Progress` decides (1 s on a terminal, 10 s in logs)
