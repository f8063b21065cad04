"""A store opened from its URL's scheme: PostgreSQL for postgresql:// and postgres://, the
history files for file:// and a plain path, and a usage error naming the known schemes for
any other, before anything is reached."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_llmperf.options import OptionError, resolve_options
from pytest_llmperf.store.files import HistoryFileStore
from pytest_llmperf.store.postgres import PostgresStore
from pytest_llmperf.store.scheme import KNOWN, check_url, open_store


@pytest.mark.parametrize("url", ["postgresql://u:secret@h:5432/db", "postgres://u@h/db?sslmode=require"])
def test_postgres_urls_open_the_postgres_store_without_reaching_it(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresStore) and store.url == url
    assert "secret" not in store.shown


def test_file_urls_and_plain_paths_open_the_history_files(tmp_path: Path) -> None:
    folder = open_store(f"file://{tmp_path}/night")
    assert isinstance(folder, HistoryFileStore)
    assert folder.history_path == tmp_path / "night" / "history.jsonl"
    assert folder.sessions_dir == tmp_path / "night" / "sessions"
    assert isinstance(local := open_store("file://localhost/srv/h.jsonl"), HistoryFileStore)
    assert local.history_path == Path("/srv/h.jsonl") and local.sessions_dir is None
    relative = open_store("store/h.jsonl", root=tmp_path)
    assert isinstance(relative, HistoryFileStore) and relative.history_path == tmp_path / "store" / "h.jsonl"
    spaced = open_store(f"file://{tmp_path}/a%20b", root=Path("/elsewhere"))
    assert isinstance(spaced, HistoryFileStore) and spaced.path == tmp_path / "a b"


@pytest.mark.parametrize(
    "url, message",
    [
        ("mysql://u:secret@h/db", "unknown store scheme 'mysql://' in 'mysql://u:***@h/db': expected postgresql://"),
        ("s3://bucket/history", "unknown store scheme 's3://'"),
        ("POSTGRESQL://h/db", "unknown store scheme 'POSTGRESQL://'"),
        (
            "file://server/share/h.jsonl",
            "'file://server/share/h.jsonl' names host 'server': a file:// store is a local path, file:///PATH",
        ),
    ],
)
def test_an_unknown_scheme_is_refused_naming_the_known_ones(url: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check_url(url)
    with pytest.raises(ValueError, match="store"):
        open_store(url)


def test_the_option_takes_every_known_scheme_and_refuses_others_before_any_server_starts() -> None:
    def resolve(url: str) -> str | None:
        return resolve_options(lambda dest: {"llmperf_store": url}.get(dest), lambda name: "").store

    for url in ("postgresql://u@h:5432/db", "postgres://h/db", "file:///tmp/night", "night/h.jsonl"):
        assert resolve(url) == url
    with pytest.raises(OptionError) as refused:
        resolve("redis://u:pw@h/0")
    text = str(refused.value)
    assert text.startswith("--llmperf-store: unknown store scheme 'redis://' in 'redis://u:***@h/0'")
    assert KNOWN in text and "pw" not in text and "--llmperf-history" in text
