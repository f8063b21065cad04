"""A result store opened from its URL's scheme (pytest-benchmark's `load_storage`):
postgresql:// and postgres:// (store/postgres.py), file:// or a plain path (a history
file or folder, store/files.py). An unknown scheme is refused by `check_url` before
anything is opened, naming the ones known."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pytest_llmperf.store.files import HistoryFileStore
from pytest_llmperf.store.postgres import PostgresStore, is_postgres, shown
from pytest_llmperf.store.protocol import ResultStore

FILE_SCHEME = "file://"
KNOWN = (
    "postgresql://USER@HOST:PORT/DB (or postgres://), file:///PATH or a plain PATH "
    "(a folder, or a history file ending in .jsonl)"
)


def scheme(url: str) -> str | None:
    """The URL's scheme with its '://' (None for a plain path)."""
    match = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url)
    return match[0] if match else None


def check_url(url: str) -> str:
    """The URL, when a store can be opened from it; ValueError naming the schemes known."""
    found = scheme(url)
    if found is None or is_postgres(url):
        return url
    if found != FILE_SCHEME:
        raise ValueError(f"unknown store scheme {found!r} in {shown(url)!r}: expected {KNOWN}")
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ValueError(f"{url!r} names host {parts.netloc!r}: a file:// store is a local path, file:///PATH")
    if not parts.path:
        raise ValueError(f"{url!r} names no path: file:///PATH")
    return url


def store_path(url: str, root: Path | None = None) -> Path:
    """The path of a file store's URL, a relative one under `root` (the rootdir; else as given)."""
    path = Path(unquote(urlsplit(url).path)) if scheme(url) == FILE_SCHEME else Path(url).expanduser()
    return path if path.is_absolute() or root is None else Path(root) / path


def open_store(url: str, root: Path | None = None) -> ResultStore:
    """The store `url` names (nothing is reached yet: its check() does that); ValueError
    for a URL no store is known for. A plain relative path is under `root`."""
    check_url(url)
    if is_postgres(url):
        return PostgresStore(url)
    return HistoryFileStore(store_path(url, root), shown=url)
