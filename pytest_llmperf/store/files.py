"""The result store as files (`--llmperf-store file:///PATH` or a plain PATH): a history
file (PATH ends in .jsonl: the history lines alone) or a folder holding its history.jsonl
and one JSON file per session under sessions/ (the batch as the spool keeps it, so
`llmperf report --store` and `llmperf baselines --store` read a night from it). History
lines are baselines/history.py's, appended under its lock; a batch written twice adds
nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.history import HISTORY_FILE, HistoryError
from pytest_llmperf.baselines.history import append as append_history
from pytest_llmperf.baselines.history import read as read_history
from pytest_llmperf.store.protocol import StoreError
from pytest_llmperf.store.spool import spool

LAYOUT = 1  # history.jsonl and sessions/<id>.json
SESSIONS_DIR = "sessions"
SESSION_KEYS = ("finished_at", "exit_status", "document")  # a session's row: its record and these


class HistoryFileStore:
    """A history file, or a folder of history and sessions (see the module's docstring)."""

    def __init__(self, path: Path, shown: str | None = None) -> None:
        self.path = Path(path)
        self.shown = shown or str(path)
        folder = self.path.suffix != ".jsonl"
        self.history_path = self.path / HISTORY_FILE if folder else self.path
        self.sessions_dir = self.path / SESSIONS_DIR if folder else None

    def _error(self, doing: str, exc: Exception | str) -> StoreError:
        return StoreError(f"store {self.shown}: {doing}: {exc}")

    # -- layout ----------------------------------------------------------------------------

    def version(self) -> int:
        there = self.history_path.parent if self.sessions_dir is None else self.sessions_dir
        return LAYOUT if there.is_dir() else 0

    def migrate(self, to: int | None = None) -> list[str]:
        if self.version() >= LAYOUT or (to is not None and to < LAYOUT):
            return []
        self._refuse_wrong_kind()
        try:
            (self.sessions_dir or self.history_path.parent).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._error("creating its folder", exc) from None
        return [f"{LAYOUT:04d}_history_files"]

    def _refuse_wrong_kind(self) -> None:
        if self.sessions_dir is None and self.path.is_dir():
            raise self._error("opening it", "a folder, not a history file: give the folder without .jsonl")
        if self.sessions_dir is not None and self.path.exists() and not self.path.is_dir():
            raise self._error("opening it", "a file: give a folder, or a history file ending in .jsonl")

    def check(self) -> int:
        self._refuse_wrong_kind()
        self.migrate()
        folder = self.history_path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise self._error("writing", f"{folder} is not writable")
        return LAYOUT

    # -- writes ----------------------------------------------------------------------------

    def _session_file(self, session_id: str) -> Path | None:
        return None if self.sessions_dir is None else self.sessions_dir / f"{session_id}.json"

    def _load(self, path: Path) -> dict[str, Any] | None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise self._error(f"reading {path.name}", exc) from None
        return loaded if isinstance(loaded, dict) else None

    def start_session(self, session: Mapping[str, Any]) -> None:
        path = self._session_file(str(session["id"]))
        if path is None or path.exists():
            return
        try:
            spool({"session": dict(session), **dict.fromkeys(SESSION_KEYS)}, path.parent)
        except OSError as exc:
            raise self._error("recording the session's start", exc) from None

    def write_batch(self, batch: Mapping[str, Any]) -> int:
        path = self._session_file(str(batch["session"]["id"]))
        if path is not None and (self._load(path) or {}).get("finished_at") is not None:
            return 0
        lines = [dict(row["line"]) for row in batch.get("history", ())]
        try:
            added = self._append_new(lines)
            if path is None:
                return added
            spool(batch, path.parent)
        except OSError as exc:
            raise self._error("writing the session's results", exc) from None
        return added + 1 + sum(len(batch.get(key) or ()) for key in ("runs", "verdicts", "baselines"))

    def _append_new(self, lines: Sequence[Mapping[str, Any]]) -> int:
        """Append the lines the history does not hold yet (a batch pushed again adds none)."""
        held = {json.dumps(line, sort_keys=True) for line in self._records()}
        return append_history(
            self.history_path, [line for line in lines if json.dumps(line, sort_keys=True) not in held]
        )

    # -- reads -----------------------------------------------------------------------------

    def _records(self) -> list[dict[str, Any]]:
        try:
            return read_history([self.history_path]).records
        except HistoryError as exc:
            raise self._error("reading the history", exc) from None

    def _batches(self) -> list[dict[str, Any]]:
        if self.sessions_dir is None:
            raise self._error("reading sessions", "a history file keeps no sessions: give a folder store")
        return [b for p in sorted(self.sessions_dir.glob("*.json")) if (b := self._load(p)) is not None]

    def baseline_files(self, session_id: str) -> list[tuple[str, str]]:
        path = self._session_file(session_id)
        batch = (self._load(path) if path is not None else None) or {}
        rows = batch.get("baselines") or ()
        return sorted((str(row["path"]), str(row["content"])) for row in rows)

    def sessions(self, group: str) -> list[dict[str, Any]]:
        rows = [
            {**b["session"], **{key: b.get(key) for key in SESSION_KEYS}}
            for b in self._batches()
            if isinstance(b.get("session"), Mapping) and b["session"].get("session_group") == group
        ]
        return sorted(rows, key=lambda s: (int(s["shard"]), str(s["started_at"])))

    def history_lines(
        self, *, target: str | None = None, servers: Sequence[str] = (), metrics: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        lines = [
            line
            for line in self._records()
            if (target is None or str(line.get("target", "")) == target)
            and (not servers or line["server"] in servers)
            and (not metrics or line["metric"] in metrics)
        ]
        return sorted(lines, key=lambda line: str(line.get("date") or ""))  # stable: appends of one date in order
