"""The shared result store on PostgreSQL (psycopg 3, the `[postgres]` extra): versioned
migrations, a session's start and its finished batch (every row keyed, so a batch written
twice is written once), and the reads of `llmperf report` and `llmperf history`.

Credentials come only from the URL, PGPASSWORD, ~/.pgpass or a service file (libpq reads
them); every message shows the URL with its password masked."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pytest_llmperf.store.protocol import StoreError as StoreError  # raised here, imported from here too
from pytest_llmperf.util.secrets import REDACTED

SCHEMES = ("postgresql://", "postgres://")
# pg_advisory_xact_lock's key: one migrating session at a time, the others wait for it.
MIGRATION_LOCK = 0x6C6C6D70  # "llmp"
CONNECT_TIMEOUT_S = 10


def is_postgres(url: str | None) -> bool:
    return bool(url) and str(url).startswith(SCHEMES)


def shown(url: str) -> str:
    """The URL as messages show it: its password masked (`postgresql://user:***@host/db`),
    in the userinfo and in a `password=` parameter."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}{':' + REDACTED if colon else ''}@{host}"
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2" + REDACTED, parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The schema's versions, in order (migrations/NNNN_name.sql; never changed once shipped)."""
    folder = resources.files("pytest_llmperf.store") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


LATEST = max(m.version for m in migrations())


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgresql:// store needs psycopg 3: pip install 'pytest-llmperf[postgres]'") from None
    return psycopg


# The batch's rows by table (rows.finish_batch), written in this order.
TABLES = (
    ("llmperf_runs", "runs"),
    ("llmperf_verdicts", "verdicts"),
    ("llmperf_history", "history"),
    ("llmperf_baselines", "baselines"),
)
# Columns of type jsonb (the others take their values as they are).
JSON_COLUMNS = frozenset({"workload_identity", "summary", "samples", "requests", "provenance", "line", "document"})


def _jsonb(value: Any) -> Any:
    return None if value is None else json.dumps(value)


def _insert(cur: Any, table: str, row: Mapping[str, Any]) -> int:
    """One keyed row; 1 when added, 0 when a row with its key was there already."""
    from psycopg import sql

    names = list(row)
    cur.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
            sql.Identifier(table),
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(sql.Placeholder() * len(names)),
        ),
        [_jsonb(row[n]) if n in JSON_COLUMNS else row[n] for n in names],
    )
    return int(cur.rowcount)


class PostgresStore:
    """One PostgreSQL database shared by every shard (URL: postgresql://user@host:port/db)."""

    def __init__(self, url: str, *, connect_timeout: int = CONNECT_TIMEOUT_S) -> None:
        self.url = url
        self.shown = shown(url)
        self.connect_timeout = connect_timeout

    def _error(self, doing: str, exc: Exception) -> StoreError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        password = self._password()
        if password:
            text = text.replace(password, REDACTED)
        return StoreError(f"store {self.shown}: {doing}: {text}")

    def _password(self) -> str | None:
        try:
            from psycopg.conninfo import conninfo_to_dict

            value = conninfo_to_dict(self.url).get("password")
        except Exception:  # an unparsable URL has no password to hide beyond the mask
            return None
        return str(value) if value else None

    @contextmanager
    def connect(self, doing: str) -> Iterator[Any]:
        """A connection in one transaction, committed on leaving; any failure a StoreError."""
        psycopg = _psycopg()
        try:
            with psycopg.connect(self.url, connect_timeout=self.connect_timeout) as conn:
                yield conn
        except psycopg.Error as exc:
            raise self._error(doing, exc) from None

    # -- schema ----------------------------------------------------------------------------

    def version(self) -> int:
        """The schema version the database holds (0: empty)."""
        with self.connect("reading the schema version") as conn:
            return self._version(conn)

    @staticmethod
    def _version(conn: Any) -> int:
        if conn.execute("SELECT to_regclass('llmperf_schema')").fetchone()[0] is None:
            return 0
        return int(conn.execute("SELECT coalesce(max(version), 0) FROM llmperf_schema").fetchone()[0])

    def migrate(self, to: int | None = None) -> list[str]:
        """Apply the versions the database lacks (up to `to`), each in its own transaction
        under an advisory lock, so shards starting together migrate once; what was applied."""
        applied = []
        for migration in migrations():
            if to is not None and migration.version > to:
                break
            with self.connect(f"migrating to schema version {migration.version}") as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS llmperf_schema (version integer PRIMARY KEY, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now())"
                )
                if self._version(conn) >= migration.version:
                    continue
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO llmperf_schema (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
                applied.append(f"{migration.version:04d}_{migration.name}")
        return applied

    def check(self) -> int:
        """Before any server starts: reachable, and at the schema this plugin writes
        (an empty database is migrated; a newer one is refused)."""
        current = self.version()
        if current > LATEST:
            raise StoreError(
                f"store {self.shown}: its schema is version {current}, this pytest-llmperf writes up to {LATEST}: "
                "upgrade pytest-llmperf"
            )
        if current < LATEST:
            self.migrate()
        return LATEST

    # -- writes ----------------------------------------------------------------------------

    def start_session(self, session: Mapping[str, Any]) -> None:
        """The session's row, unfinished: a shard that never finishes shows as such."""
        with self.connect("recording the session's start") as conn:
            self._insert_session(conn, session)

    @staticmethod
    def _insert_session(conn: Any, s: Mapping[str, Any]) -> None:
        conn.execute(
            "INSERT INTO llmperf_sessions (id, session_group, shard, shards, host, ci_job_url, git_commit, target, "
            "image, started_at, report_dir) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (
                s["id"],
                s["session_group"],
                s["shard"],
                s["shards"],
                s.get("host"),
                s.get("ci_job_url"),
                s.get("git_commit"),
                s.get("target"),
                s.get("image"),
                s["started_at"],
                s.get("report_dir"),
            ),
        )

    def write_batch(self, batch: Mapping[str, Any]) -> int:
        """A finished session's batch (rows.finish_batch) in one transaction; the rows it
        added (0 when every one was already there)."""
        sid = batch["session"]["id"]
        added = 0
        with self.connect("writing the session's results") as conn:
            self._insert_session(conn, batch["session"])
            with conn.cursor() as cur:
                for table, key in TABLES:
                    for row in batch.get(key, ()):
                        added += _insert(cur, table, {"session_id": sid, **row})
                cur.execute(
                    "UPDATE llmperf_sessions SET finished_at = %s, exit_status = %s, document = %s, digest = %s "
                    "WHERE id = %s AND finished_at IS NULL",
                    (batch["finished_at"], batch["exit_status"], _jsonb(batch["document"]), batch.get("digest"), sid),
                )
                added += int(cur.rowcount)
        return added

    # -- reads -----------------------------------------------------------------------------

    def baseline_files(self, session_id: str) -> list[tuple[str, str]]:
        """The (path, text) of each baseline file a session wrote."""
        with self.connect("reading the recorded baselines") as conn:
            rows = conn.execute(
                "SELECT path, content FROM llmperf_baselines WHERE session_id = %s ORDER BY path", (session_id,)
            ).fetchall()
            return [(str(path), str(text)) for path, text in rows]

    def sessions(self, group: str) -> list[dict[str, Any]]:
        """The sessions of one group (a night's shards), with their documents, by shard."""
        with self.connect(f"reading session group {group!r}") as conn:
            cur = conn.execute(
                "SELECT id, session_group, shard, shards, host, ci_job_url, git_commit, target, image, "
                "started_at, finished_at, exit_status, report_dir, document FROM llmperf_sessions "
                "WHERE session_group = %s ORDER BY shard, started_at",
                (group,),
            )
            names = [d.name for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def history_lines(
        self, *, target: str | None = None, servers: Sequence[str] = (), metrics: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """History lines as history.jsonl holds them, oldest first, optionally of one target
        (baseline folder), some servers and metrics."""
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if target is not None:
            where.append("target = %s")
            params.append(target)
        if servers:
            where.append("server = ANY(%s)")
            params.append(list(servers))
        if metrics:
            where.append("metric = ANY(%s)")
            params.append(list(metrics))
        sql = (
            f"SELECT line FROM llmperf_history WHERE {' AND '.join(where)} "  # noqa: S608 - fixed fragments only
            "ORDER BY recorded_at NULLS FIRST, session_id"
        )
        with self.connect("reading the history") as conn:
            return [dict(row[0]) for row in conn.execute(sql, params).fetchall()]
