"""The interface every server target implements (sim, docker, external, local vLLM)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.spec import ServerSpec


class ServerStartError(RuntimeError):
    """A server did not come up. The message carries what a human needs (exit code, log tail)."""


class ServerTarget(Protocol):
    name: str  # "sim", "docker", "external", "local-vllm": shown in headers and baselines
    starts_servers: bool  # False: an endpoint someone else runs, never started or stopped here

    def start(self, spec: ServerSpec) -> AbstractContextManager[Endpoint]:
        """Start (or attach to) a server for `spec`; stop it when the context exits."""
        ...
