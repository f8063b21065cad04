"""One session's use of a shared store (any protocol.ResultStore): checked, set up and its
start recorded before any server starts; its runs, verdicts and history written at its end
in one batch, or, when the store is lost, spooled beside the report for `llmperf store push`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.store.protocol import ResultStore, StoreError
from pytest_llmperf.store.rows import finish_batch
from pytest_llmperf.store.session_info import SessionInfo, now
from pytest_llmperf.store.spool import push, spool


class SharedStore:
    def __init__(self, store: ResultStore, info: SessionInfo, spool_dir: Path) -> None:
        self.store = store
        self.info = info
        self.spool_dir = spool_dir

    @property
    def label(self) -> str:
        return f"session {self.info.id[:12]} (group {self.info.session_group}, {self.info.label})"

    def begin(self) -> list[str]:
        """Before any server starts: reachable, at this plugin's schema (an empty database is
        migrated), batches an earlier session spooled here pushed, this session's start
        recorded. StoreError (the URL masked) otherwise."""
        version = self.store.check()
        lines = []
        pushed = push(self.spool_dir, self.store.write_batch)
        if pushed.batches:
            lines.append(
                f"store: pushed {pushed.batches} spooled session(s) from {self.spool_dir} ({pushed.rows} new row(s))"
            )
        lines += [f"store: {problem}" for problem in pushed.problems]
        self.store.start_session(self.info.to_dict())
        lines.append(f"store {self.store.shown} (schema {version}): {self.label}")
        return lines

    def history(self, target: str) -> list[dict[str, Any]]:
        """The history lines of baseline folder `target` (the gate's confirmation reads them)."""
        return self.store.history_lines(target=target)

    def finish(self, document: Mapping[str, Any] | None, exit_status: int, rootdir: Path) -> list[str]:
        """Write the session's batch (with the baseline files it wrote, read from under
        `rootdir`); when the store is lost, spool it. The summary's lines."""
        history = list((document or {}).get("history") or [])
        baselines = []
        for path in (document or {}).get("baselines_written") or []:
            try:
                baselines.append((str(path), (rootdir / path).read_text(encoding="utf-8")))
            except OSError:  # gone since it was written: the store keeps the rest
                continue
        batch = finish_batch(self.info.to_dict(), document, history, exit_status, now(), baselines)
        try:
            added = self.store.write_batch(batch)
        except StoreError as exc:
            path = spool(batch, self.spool_dir)
            rows = len(batch["runs"]) + len(batch["verdicts"]) + len(batch["history"])
            return [
                f"store NOT WRITTEN: {exc}",
                f"  {rows} row(s) of {self.label} spooled to {path}; the verdicts above stand (judged from the "
                f"baseline files). Write them with: llmperf store push {self.spool_dir} --store URL "
                "(or the next session against this store pushes them)",
            ]
        return [f"store: {self.label}: {added} row(s) written to {self.store.shown}"]
