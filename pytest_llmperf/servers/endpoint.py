"""Endpoint: a running OpenAI-compatible server, whoever started it."""

from __future__ import annotations

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
