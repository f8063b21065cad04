"""Did the server run the run's concurrency? vLLM's `vllm:num_requests_running` gauge,
sampled through the measured window (workload/server_probe.py), against what was sent.

A closed-loop client keeps `concurrency` requests in flight, but a server whose batch is
capped (`--max-num-seqs` below the concurrency, or no KV-cache room) queues the rest:
the figures then measure a smaller batch than the test names. Such a run is `invalid`.

Samples are `[seconds since the window opened, requests the client had in flight (None
where not known), running, waiting (None without the gauge)]`, raw, in the run result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"

# The peak must reach this share of the target, rounded down: a request that has just
# finished leaves its slot empty until the client's next one is admitted, so one short
# under 10 streams, four at 32 (28 of 32).
MIN_RUNNING_SHARE = 0.9
# Samples with the client's requests in flight it takes to call a low peak the server's
# doing when none waited on it: a request between the client and the server's admission
# (sent, not yet running) can catch one sample or two of a short run.
MIN_LOADED_SAMPLES = 3
# Samples with requests waiting on the server that show it capped: one alone can be a
# request that arrived between two scheduler steps (or waits a step for prefill budget).
MIN_QUEUED_SAMPLES = 2

Sample = Sequence[float | None]


def gauge_total(page: str, name: str) -> float | None:
    """The sum over labels (engines) of gauge `name` on a Prometheus text page, or None when
    the page has no such sample. A line scan, not a parse: it runs every half second
    during a measured run, and a full parse of vLLM's page costs milliseconds."""
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
    # Samples taken while the client had `required` requests in flight (or did not say):
    # without one, and with none waiting, a low peak may be only the run's tail.
    loaded: int = 0
    # Samples with requests waiting on the server (the gauge above 0).
    queued: int = 0
    # Completed streams that stalled (metrics/failures.stalls): a stalled stream stays in
    # flight at the client after the server has finished generating it.
    stalled: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def shortfall(self) -> str | None:
        """Why the run cannot be judged at its concurrency, with what to do; None when the
        peak reached `required`, or nothing shows it could have: no request waited on the
        server in MIN_QUEUED_SAMPLES samples and fewer than MIN_LOADED_SAMPLES samples caught the
        client with `required` in flight. Nor is a low peak with none waiting held against a
        run whose streams stalled: the client's in-flight count then includes streams the
        server had finished, and the stalls are named beside the verdict
        (metrics/failures.faults_note) as what a change beside them may be."""
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
    """The figures of `samples` (None: not sampled, e.g. a server without the gauge or a
    run shorter than one poll), of a run with `stalled` stalled streams; None when there
    is nothing to judge, or the gauge never moved off 0 (stats disabled on the server)."""
    if not samples or sent < 1:
        return None
    running = [float(s[2]) for s in samples if s[2] is not None]
    if not running or max(running) == 0:
        # Nothing ever running while requests were sent and answered: the gauge is not live
        # (a server started with --disable-log-stats never updates it), so it tells nothing.
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
