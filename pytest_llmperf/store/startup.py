"""A session's start on its store (`--llmperf-store`): the store opened from its URL, this
session's record, the spool folder for a store lost at the end; reached, set up and the
start recorded before anything is collected or started. A store that cannot be is a
usage error."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import pytest

from pytest_llmperf.store.protocol import StoreError
from pytest_llmperf.store.scheme import open_store
from pytest_llmperf.store.session_info import new_session
from pytest_llmperf.store.shared import SharedStore
from pytest_llmperf.store.spool import spool_folder


class StoreOptions(Protocol):
    """What the start reads of the session's options (options.LlmperfOptions)."""

    @property
    def store(self) -> str | None: ...
    @property
    def session_group(self) -> str | None: ...
    @property
    def shard(self) -> tuple[int, int] | None: ...
    @property
    def target(self) -> str | None: ...
    @property
    def target_name(self) -> str | None: ...
    @property
    def image(self) -> str | None: ...
    @property
    def report(self) -> str | None: ...


def begin_store(options: StoreOptions, rootdir: Path, git_commit: str | None) -> tuple[SharedStore, list[str]]:
    """The session's SharedStore, begun, and the lines to show; pytest.UsageError when the
    store cannot be opened, reached or written."""
    try:
        store = open_store(str(options.store), rootdir)
    except ValueError as exc:
        raise pytest.UsageError(f"--llmperf-store: {exc}") from None
    info = new_session(
        group=options.session_group,
        shard=options.shard,
        target=options.target_name or options.target,
        image=options.image,
        git_commit=git_commit,
        report_dir=str((rootdir / options.report).resolve()) if options.report else None,
    )
    shared = SharedStore(store, info, spool_folder(options.report, rootdir))
    try:
        return shared, shared.begin()
    except StoreError as exc:
        raise pytest.UsageError(f"--llmperf-store: {exc}") from None
