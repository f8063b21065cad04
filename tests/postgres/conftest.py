"""The store's tests run against a real PostgreSQL: one throwaway server per test session
(server.py) and a fresh database per test (pytest-postgresql's DatabaseJanitor). No server
binaries: the tests skip, or fail under LLMPERF_REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("psycopg")
janitor = pytest.importorskip("pytest_postgresql.janitor")

from tests.postgres.server import SUPERUSER, Server, remove_server, start_server  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    server = start_server()
    if server is None:
        message = "no PostgreSQL server binaries (Debian: apt-get install postgresql; .ci/setup_postgres.sh)"
        if os.environ.get("LLMPERF_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield server
    finally:
        remove_server(server)


@pytest.fixture
def store_url(postgres_server: Server) -> Iterator[str]:
    """A fresh, empty database on the throwaway server; dropped after the test."""
    name = f"llmperf_{uuid.uuid4().hex[:12]}"
    with janitor.DatabaseJanitor(user=SUPERUSER, host="127.0.0.1", port=postgres_server.port, dbname=name):
        yield postgres_server.url(name)
