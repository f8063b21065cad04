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
    # What we know about the server for baselines: vllm_version, image, image_digest,
    # gpu_name, gpu_count, driver, ... Filled by the target; never holds secrets.
    provenance: dict[str, Any] = field(default_factory=dict)
    # Opens a peak GPU memory sampling window (gpu_info.sampling_peak_memory) on the
    # server's GPUs; None where the target has none to watch (sim, external, real CPU).
    memory_sampler: Callable[[], AbstractContextManager[dict[str, Any]]] | None = field(
        default=None, repr=False, compare=False
    )

    # Why the server's process (or container) is gone: exit code, out of memory, removed;
    # None while it runs. None where the target has no process to watch (external).
    exit_status: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    # The server's last `n` log lines as one text, secrets redacted; None where the target
    # has no log (external).
    log_tail: Callable[[int], str] | None = field(default=None, repr=False, compare=False)

    def sample_peak_memory(self) -> AbstractContextManager[dict[str, Any]]:
        """Wrap one run in this: the dict it yields holds the run's peak GPU memory figures
        once the block exits (peak_gpu_memory_mib, ..._per_gpu_mib, gpu_memory_samples);
        it stays empty without GPUs."""
        return self.memory_sampler() if self.memory_sampler is not None else nullcontext({})
