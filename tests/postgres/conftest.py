"""A throwaway PostgreSQL server for the store's tests: Debian's binaries, started once per
test session by pytest-postgresql's executor in a temporary folder on a free port, and a
fresh database per test (its DatabaseJanitor). PostgreSQL refuses to run as root, so under
root the server runs as the `postgres` user. No server found: the tests skip, or fail
under LLMPERF_REQUIRE_POSTGRES=1 (CI)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import stat
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("psycopg")
postgresql_executors = pytest.importorskip("pytest_postgresql.executors")
janitor = pytest.importorskip("pytest_postgresql.janitor")

SUPERUSER = "postgres"


def find_pg_ctl() -> str | None:
    found = shutil.which("pg_ctl")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return candidates[-1] if candidates else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    executor: object
    port: int
    folder: Path

    def url(self, dbname: str, password: str | None = None) -> str:
        auth = f"{SUPERUSER}:{password}" if password else SUPERUSER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        self.executor.stop()  # type: ignore[attr-defined]

    def start(self) -> None:
        self.executor.start()  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    pg_ctl = find_pg_ctl()
    if pg_ctl is None:
        message = "no PostgreSQL server binaries (Debian: apt-get install postgresql; .ci/setup_postgres.sh)"
        if os.environ.get("LLMPERF_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="llmperf-pg-"))
    executable = pg_ctl
    if os.getuid() == 0:  # initdb and postgres refuse root: run them as the postgres user
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        folder.chmod(0o755)  # the socket folder, reachable by this process too
        wrapper = Path(tempfile.mkdtemp(prefix="llmperf-pgctl-")) / "pg_ctl"
        wrapper.write_text(f'#!/bin/sh\ncd /\nexec runuser -u postgres -- "{pg_ctl}" "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        executable = str(wrapper)
    port = free_port()
    executor = postgresql_executors.PostgreSQLExecutor(
        executable=executable,
        host="127.0.0.1",
        port=port,
        datadir=str(folder / "data"),
        unixsocketdir=str(folder),
        logfile=str(folder / "postgresql.log"),
        startparams="-w",
        dbname="postgres",
        user=SUPERUSER,
        password=None,
    )
    executor.start()
    try:
        yield Server(executor, port, folder)
    finally:
        executor.stop()
        shutil.rmtree(folder, ignore_errors=True)
        if executable != pg_ctl:
            shutil.rmtree(Path(executable).parent, ignore_errors=True)


@pytest.fixture
def store_url(postgres_server: Server) -> Iterator[str]:
    """A fresh, empty database on the throwaway server; dropped after the test."""
    name = f"llmperf_{uuid.uuid4().hex[:12]}"
    with janitor.DatabaseJanitor(user=SUPERUSER, host="127.0.0.1", port=postgres_server.port, dbname=name):
        yield postgres_server.url(name)
