"""What the session, the history and the store's commands (`llmperf store`, `llmperf report
--store`, `llmperf history --store`) need of a result store; scheme.open_store picks the
implementation from the URL (postgres.PostgresStore, files.HistoryFileStore)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class StoreError(RuntimeError):
    """The store cannot be reached, read or written; the message shows the masked URL."""


class ResultStore(Protocol):
    """A store of sessions (a night's shards), their batches (store/rows.finish_batch) and
    history lines (baselines/history.py's format). Every failure is a StoreError."""

    @property
    def shown(self) -> str:
        """The store as messages show it (a URL's password masked)."""
        ...

    def version(self) -> int:
        """The layout version the store holds (0: empty)."""
        ...

    def migrate(self, to: int | None = None) -> list[str]:
        """Bring the store to this plugin's layout (up to `to`); the steps applied."""
        ...

    def check(self) -> int:
        """Before any server starts: reachable, writable and at this plugin's layout (an
        empty store is set up, a newer one refused); the version."""
        ...

    def start_session(self, session: Mapping[str, Any]) -> None:
        """The session's record, unfinished: a shard that never finishes shows as such."""
        ...

    def write_batch(self, batch: Mapping[str, Any]) -> int:
        """A finished session's batch, once: the rows it added (0 when it was written before)."""
        ...

    def baseline_files(self, session_id: str) -> list[tuple[str, str]]:
        """The (path, text) of each baseline file a session wrote."""
        ...

    def sessions(self, group: str) -> list[dict[str, Any]]:
        """The sessions of one group (a night's shards) with their documents, by shard."""
        ...

    def history_lines(
        self, *, target: str | None = None, servers: Sequence[str] = (), metrics: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """History lines, oldest first, optionally of one target (baseline folder), some
        servers and metrics."""
        ...
