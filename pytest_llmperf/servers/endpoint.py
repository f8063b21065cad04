"""Endpoint: a running OpenAI-compatible server, whoever started it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Endpoint:
    base_url: str  # e.g. "http://127.0.0.1:8123" (no trailing slash, no /v1)
    model: str  # the model id to send in requests
    target: str  # "sim", "docker", "external", "local-vllm", ...
    provenance: dict[str, Any] = field(default_factory=dict)  # for baselines; never secrets
    # A peak GPU memory sampling window; None where the target has no GPUs to watch.
    memory_sampler: Callable[[], AbstractContextManager[dict[str, Any]]] | None = field(
        default=None, repr=False, compare=False
    )
    # Why the server's process is gone (None while it runs); None: nothing to watch.
    exit_status: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    # The last `n` log lines, redacted; None where the target has no log.
    log_tail: Callable[[int], str] | None = field(default=None, repr=False, compare=False)

    def sample_peak_memory(self) -> AbstractContextManager[dict[str, Any]]:
        """Wrap one run in this: the dict it yields holds the run's peak GPU memory figures."""
        return self.memory_sampler() if self.memory_sampler is not None else nullcontext({})
