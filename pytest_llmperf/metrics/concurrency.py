"""Did the server run the run's concurrency? vLLM's running gauge, sampled through the
measured window, against what was sent: a capped batch makes the run invalid. Samples
are `[seconds, client in flight (None: unknown), running, waiting (None: no gauge)]`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"

# The peak must reach this share of the target (a finished request's slot is empty until
# the next is admitted).
MIN_RUNNING_SHARE = 0.9
MIN_LOADED_SAMPLES = 3  # samples with the client fully loaded that blame a low peak on the server
MIN_QUEUED_SAMPLES = 2  # samples with requests waiting that show it capped (one can be a step's gap)

Sample = Sequence[float | None]


def gauge_total(page: str, name: str) -> float | None:
    """The sum over labels of gauge `name` on a Prometheus page, or None without a sample.
    A line scan: a full parse costs milliseconds every half second."""
    total = None
    for line in page.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        rest = line[line.rindex("}") + 1 :] if "}" in line else line[len(name) :]
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        if not math.isnan(value):
            total = (total or 0.0) + value
    return total


@dataclass(frozen=True)
class Reached:
    """What the samples of one run show, against the concurrency it should have reached."""

    samples: int
    peak: float  # the most requests running at once, over the samples
    mean: float
    peak_waiting: float | None  # the most waiting at once (None: no waiting gauge)
    concurrency: int
    sent: int  # requests sent in the measured window
    target: int  # min(concurrency, sent): what a run of few prompts can reach at most
    required: int  # the peak below which the run is invalid
    loaded: int = 0  # samples with the client at `required` in flight (or not saying)
    queued: int = 0  # samples with requests waiting on the server
    stalled: int = 0  # stalled streams: in flight at the client after the server finished them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shortfall(self) -> str | None:
        """Why the run cannot be judged at its concurrency, with what to do; None when the
        peak reached `required`, or nothing shows it could have (not queued, not loaded, or
        streams stalled)."""
        capped = self.queued >= MIN_QUEUED_SAMPLES
        loaded = self.loaded >= MIN_LOADED_SAMPLES and not self.stalled
        if self.peak >= self.required or not (capped or loaded):
            return None
        of = (
            f"concurrency {self.concurrency}"
            if self.target == self.concurrency
            else f"the {self.sent} requests sent, fewer than the concurrency {self.concurrency}"
        )
        reason = (
            f"the server never ran the run's concurrency: at most {self.peak:g} requests running at once "
            f"(mean {self.mean:.1f}, {self.samples} samples of {RUNNING}), below {self.required}, "
            f"{MIN_RUNNING_SHARE:.0%} of {of}"
        )
        if capped:
            return reason + (
                f"; up to {self.peak_waiting:g} waited on the server meanwhile: it admits about {self.peak:g} "
                f"at a time (its --max-num-seqs, or the KV cache's room): start it with --max-num-seqs >= "
                f"{self.target} (and the memory for it), or test at concurrency {self.peak:g} or less"
            )
        return reason + (
            "; none waited on the server: the requests did not reach it together (the client fell behind, "
            "or something between limits connections), or each was too short to overlap the others: "
            "check the path to the server, or raise max_tokens"
        )


def reached(samples: Sequence[Sample] | None, concurrency: int, sent: int, stalled: int = 0) -> Reached | None:
    """The figures of `samples`; None when there is nothing to judge, or the gauge never
    moved off 0 (stats disabled on the server)."""
    if not samples or sent < 1:
        return None
    running = [float(s[2]) for s in samples if s[2] is not None]
    if not running or max(running) == 0:
        return None
    waiting = [float(s[3]) for s in samples if s[3] is not None]
    target = min(concurrency, sent)
    required = max(1, math.floor(MIN_RUNNING_SHARE * target))
    return Reached(
        samples=len(running),
        peak=max(running),
        mean=sum(running) / len(running),
        peak_waiting=max(waiting) if waiting else None,
        concurrency=concurrency,
        sent=sent,
        target=target,
        required=required,
        loaded=sum(1 for s in samples if s[2] is not None and (s[1] is None or s[1] >= required)),
        queued=sum(1 for s in samples if s[2] is not None and s[3] is not None and s[3] > 0),
        stalled=stalled,
    )
