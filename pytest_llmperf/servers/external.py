"""An endpoint someone else runs (--llmperf-base-url): attach, never start or stop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.provenance import server_provenance
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.http import server_root


class ExternalTarget:
    name = "external"
    starts_servers = False

    def __init__(self, base_url: str, ready_timeout: float = 30.0) -> None:
        self.base_url = server_root(base_url)
        self.ready_timeout = ready_timeout

    @contextmanager
    def start(self, spec: ServerSpec) -> Iterator[Endpoint]:
        wait_until_ready(self.base_url, spec.model_id, self.ready_timeout)
        yield Endpoint(self.base_url, spec.model_id, self.name, server_provenance(self.base_url))
