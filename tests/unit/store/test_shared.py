"""A session's use of a store through the protocol: any ResultStore (here one in memory)
is begun, written at the session's end and, when lost, spooled and pushed once by the next
session; the start from `--llmperf-store` opens the store its URL's scheme names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.store.protocol import ResultStore, StoreError
from pytest_llmperf.store.session_info import new_session
from pytest_llmperf.store.shared import SharedStore
from pytest_llmperf.store.spool import pending
from pytest_llmperf.store.startup import begin_store


class MemoryStore:
    """A ResultStore in memory; `reachable` False: every write fails as a lost store's does."""

    def __init__(self, reachable: bool = True) -> None:
        self.shown = "memory://"
        self.reachable = reachable
        self.started: list[Mapping[str, Any]] = []
        self.batches: dict[str, Mapping[str, Any]] = {}

    def version(self) -> int:
        return 1

    def migrate(self, to: int | None = None) -> list[str]:
        return []

    def check(self) -> int:
        return 1

    def start_session(self, session: Mapping[str, Any]) -> None:
        self.started.append(session)

    def write_batch(self, batch: Mapping[str, Any]) -> int:
        if not self.reachable:
            raise StoreError("store memory://: writing the session's results: connection lost")
        sid = str(batch["session"]["id"])
        if sid in self.batches:
            return 0
        self.batches[sid] = batch
        return 1 + len(batch["history"])

    def baseline_files(self, session_id: str) -> list[tuple[str, str]]:
        return [(r["path"], r["content"]) for r in self.batches[session_id]["baselines"]]

    def sessions(self, group: str) -> list[dict[str, Any]]:
        return [dict(b["session"]) for b in self.batches.values() if b["session"]["session_group"] == group]

    def history_lines(
        self, *, target: str | None = None, servers: Sequence[str] = (), metrics: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        lines = [dict(row["line"]) for b in self.batches.values() for row in b["history"]]
        return [line for line in lines if target is None or line["target"] == target]


LINE = {"date": "2026-12-01", "server": "m", "concurrency": 8, "metric": "decode_tok_s", "value": 1.0}
DOCUMENT = {"runs": [], "verdicts": [], "history": [{**LINE, "outcome": "pass", "target": "sim"}]}


def shared(store: ResultStore, spool_dir: Path) -> SharedStore:
    info = new_session(group="night", shard=None, target="sim", image=None, git_commit=None, report_dir=None, env={})
    return SharedStore(store, info, spool_dir)


def test_a_session_on_any_store_is_begun_written_and_read_back(tmp_path: Path) -> None:
    store = MemoryStore()
    session = shared(store, tmp_path / "spool")
    assert session.begin() == [f"store memory:// (schema 1): {session.label}"]
    assert [s["id"] for s in store.started] == [session.info.id]
    assert session.finish(DOCUMENT, 0, tmp_path) == [f"store: {session.label}: 2 row(s) written to memory://"]
    assert session.history("sim") == DOCUMENT["history"] and session.history("gpu") == []


def test_a_lost_store_spools_the_batch_and_the_next_session_pushes_it_once(tmp_path: Path) -> None:
    lost = shared(MemoryStore(reachable=False), tmp_path / "spool")
    lost.begin()
    lines = lost.finish(DOCUMENT, 1, tmp_path)
    assert lines[0] == "store NOT WRITTEN: store memory://: writing the session's results: connection lost"
    assert [p.stem for p in pending(tmp_path / "spool")] == [lost.info.id]
    back = MemoryStore()
    again = shared(back, tmp_path / "spool")
    assert again.begin()[0].startswith(f"store: pushed 1 spooled session(s) from {tmp_path / 'spool'} (2 new row(s))")
    assert list(back.batches) == [lost.info.id] and pending(tmp_path / "spool") == []


@dataclass(frozen=True)
class Options:
    store: str | None
    session_group: str | None = "night"
    shard: tuple[int, int] | None = (2, 3)
    target: str | None = "sim"
    target_name: str | None = None
    image: str | None = None
    report: str | None = "report"


def test_the_start_opens_the_store_its_scheme_names_and_refuses_what_it_cannot(tmp_path: Path) -> None:
    session, lines = begin_store(Options(store="night"), tmp_path, "abc123")  # a plain path: under the rootdir
    assert session.store.shown == "night" and lines == [f"store night (schema 1): {session.label}"]
    assert (session.info.shard, session.info.git_commit) == (2, "abc123")
    assert session.spool_dir == tmp_path / "report" / "store-spool"
    assert [s["id"] for s in session.store.sessions("night")] == [session.info.id]
    with pytest.raises(pytest.UsageError, match=r"^--llmperf-store: unknown store scheme 'ftp://'"):
        begin_store(Options(store="ftp://h/x"), tmp_path, None)
    (tmp_path / "file").write_text("")
    with pytest.raises(pytest.UsageError, match=r"^--llmperf-store: store file: opening it: a file"):
        begin_store(Options(store="file"), tmp_path, None)
