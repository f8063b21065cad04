"""A throwaway PostgreSQL server from Debian's binaries, started by pytest-postgresql's
executor in a temporary folder on a free port; under root as the `postgres` user
(PostgreSQL refuses root). Used by the store's tests and benchmarks/store_load.py."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    executor: Any
    port: int
    folder: Path

    def url(self, dbname: str, password: str | None = None) -> str:
        auth = f"{SUPERUSER}:{password}" if password else SUPERUSER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        self.executor.stop()

    def start(self) -> None:
        self.executor.start()


def start_server() -> Server | None:
    """A started server, or None when no PostgreSQL binaries are installed."""
    from pytest_postgresql.executors import PostgreSQLExecutor

    pg_ctl = find_pg_ctl()
    if pg_ctl is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="llmperf-pg-"))
    executable = pg_ctl
    if os.getuid() == 0:  # initdb and postgres refuse root: run them as the postgres user
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        folder.chmod(0o755)  # the socket folder, reachable by this process too
        wrapper = folder.with_name(folder.name + "-bin") / "pg_ctl"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\ncd /\nexec runuser -u postgres -- "{pg_ctl}" "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        executable = str(wrapper)
    executor = PostgreSQLExecutor(
        executable=executable,
        host="127.0.0.1",
        port=free_port(),
        datadir=str(folder / "data"),
        unixsocketdir=str(folder),
        logfile=str(folder / "postgresql.log"),
        startparams="-w",
        dbname="postgres",
        user=SUPERUSER,
        password=None,
    )
    executor.start()
    return Server(executor, executor.port, folder)


def remove_server(server: Server) -> None:
    server.executor.stop()
    shutil.rmtree(server.folder, ignore_errors=True)
    shutil.rmtree(server.folder.with_name(server.folder.name + "-bin"), ignore_errors=True)
