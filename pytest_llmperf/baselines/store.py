"""The baseline store: the files under a root folder (baselines/<target>/<server>.json,
the layout in layout.py), read checked (validate.py), recorded atomically under their
folder's lock, or queued by a session and written at its end (`flush`); unused entries
listed and pruned; the report-only published figures beside them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

try:  # POSIX advisory locks; elsewhere writes are still atomic, just not serialized
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # None: no locks on this platform

from pytest_llmperf.baselines.entries import BaselineFile, PublishedFile, entry_update, positive_concurrency
from pytest_llmperf.baselines.layout import (
    FORMAT,
    PUBLISHED_DIR,
    PUBLISHED_FORMAT,
    READ_FORMATS,
    SIG_DIGITS,
    WHERE_KEYS,
    BaselineError,
    sanitize_name,
    stable_float,
    workload_key,
)
from pytest_llmperf.baselines.validate import check_header, entries_of, published_entries, read_json
from pytest_llmperf.util.files import atomic_write_text

__all__ = [  # the store's names, as its callers import them
    "FORMAT",
    "PUBLISHED_DIR",
    "PUBLISHED_FORMAT",
    "READ_FORMATS",
    "SIG_DIGITS",
    "WHERE_KEYS",
    "BaselineError",
    "BaselineFile",
    "BaselineStore",
    "PublishedFile",
    "sanitize_name",
    "stable_float",
    "workload_key",
]


@contextlib.contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    """Serialize read-modify-write of files in `directory`; locks the directory itself (no lock file)."""
    directory.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class BaselineStore:
    """Baseline files under `root`; `deferred`: records are queued until `flush()`, and
    `load` and `entries_at` read the files as the queue will leave them."""

    def __init__(self, root: Path | str, *, deferred: bool = False):
        self.root = Path(root)
        self.deferred = deferred
        self._pending: dict[tuple[str, str], list[Callable[[BaselineFile], None]]] = {}
        self.written: list[Path] = []  # every file flush() wrote, in order

    def path_for(self, target: str, server: str) -> Path:
        target_dir = sanitize_name(target)
        if target_dir == PUBLISHED_DIR:
            raise ValueError(f"target name {target!r} is reserved for published reference figures")
        return self.root / target_dir / f"{sanitize_name(server)}.json"

    def published_path_for(self, server: str) -> Path:
        return self.root / PUBLISHED_DIR / f"{sanitize_name(server)}.json"

    # -- baselines --

    def load(self, target: str, server: str) -> BaselineFile | None:
        """The baseline file (with the queued records), or None when there is none;
        BaselineError when it is unusable."""
        current = self._read(target, server)
        updates = self._pending.get((sanitize_name(target), sanitize_name(server)), [])
        if updates:
            current = current or self._empty(target, server)
            for update in updates:
                update(current)
        return current

    def _read(self, target: str, server: str) -> BaselineFile | None:
        path = self.path_for(target, server)
        if not path.exists():
            return None
        doc = read_json(path)
        check_header(path, doc, {"target": sanitize_name(target), "server": sanitize_name(server)}, READ_FORMATS)
        return BaselineFile(path=path, target=doc["target"], server=doc["server"], entries=entries_of(path, doc))

    def _empty(self, target: str, server: str) -> BaselineFile:
        return BaselineFile(self.path_for(target, server), sanitize_name(target), sanitize_name(server))

    def servers_in(self, target: str) -> list[str]:
        """The servers with a baseline file (or queued records) in `target`'s folder."""
        folder = self.root / sanitize_name(target)
        on_disk = {path.stem for path in folder.glob("*.json")} if folder.is_dir() else set()
        queued = {server for t, server in self._pending if t == sanitize_name(target)}
        return sorted(on_disk | queued)

    def entries_at(self, target: str, concurrency: int) -> list[tuple[str, str, dict[str, Any]]]:
        """Every entry at `concurrency` in `target`'s folder, over all its servers' files, as
        (server, workload key, entry); a file that cannot be read is left out (its own test
        reports it)."""
        found: list[tuple[str, str, dict[str, Any]]] = []
        for server in self.servers_in(target):
            try:
                current = self.load(target, server)
            except BaselineError:
                continue
            if current is not None:
                found += [(current.server, key, e) for key, e in current.entries.get(int(concurrency), {}).items()]
        return found

    def record(
        self,
        target: str,
        server: str,
        concurrency: int,
        metrics: Mapping[str, Sequence[float | None] | float | None],
        workload: Mapping[str, Any],
        provenance: Mapping[str, Any],
        *,
        requests: list[str] | None = None,
        outputs: list[str] | None = None,
        session: str = "",
        nights: int = 1,
    ) -> BaselineFile:
        """Record one concurrency's metrics under `workload`'s key and write the file (or
        queue it, when deferred); other concurrencies and other workloads' entries are kept.

        Each metric is samples or one value; None samples are skipped, a metric with none
        is not recorded. Earlier metrics, `requests` and `outputs` (when None) of the same
        workload and hardware are kept; the key run elsewhere replaces the whole entry. A
        metric's level is the median of the last `nights` recording sessions' values of the
        same build (entries.entry_update; `session`: this recording session's id).
        """
        update = entry_update(
            positive_concurrency(concurrency),
            metrics,
            workload,
            provenance,
            requests,
            outputs,
            session=session,
            nights=nights,
        )
        if self.deferred:
            current = self._writable(target, server, self.load)
            update(current)
            self._pending.setdefault((sanitize_name(target), sanitize_name(server)), []).append(update)
            return current
        path = self.path_for(target, server)
        with _directory_lock(path.parent):
            current = self._writable(target, server, self._read)
            update(current)
            atomic_write_text(path, current.to_json())
            return current

    def _writable(self, target: str, server: str, read: Callable[[str, str], BaselineFile | None]) -> BaselineFile:
        try:
            current = read(target, server)
        except BaselineError as exc:
            # Never overwrite what we cannot read: it may be someone's hand edit.
            raise BaselineError(exc.path, f"{exc.problem}; fix or delete the file, then record again") from None
        return current or self._empty(target, server)

    def flush(self) -> tuple[list[Path], list[str]]:
        """Write the queued records, each file re-read under its folder's lock; returns the
        files written and why others could not be."""
        written: list[Path] = []
        problems: list[str] = []
        pending, self._pending = self._pending, {}
        for (target, server), updates in pending.items():
            path = self.path_for(target, server)
            try:
                with _directory_lock(path.parent):
                    current = self._writable(target, server, self._read)
                    for update in updates:
                        update(current)
                    atomic_write_text(path, current.to_json())
                written.append(path)
            except (OSError, BaselineError) as exc:
                problems.append(f"{path}: not written: {exc}")
        self.written += written
        return written, problems

    def pending_entries(self) -> int:
        """How many records are queued."""
        return sum(len(updates) for updates in self._pending.values())

    def unused(self, target: str, server: str, asked: Collection[tuple[int, str]]) -> list[tuple[int, str]]:
        """The (concurrency, workload key) entries of `server`'s file that are not `asked` for."""
        current = self.load(target, server)
        if current is None:
            return []
        return sorted((c, key) for c, at in current.entries.items() for key in at if (c, key) not in asked)

    def prune(self, target: str, server: str, drop: Collection[tuple[int, str]]) -> int:
        """Remove the (concurrency, workload key) entries `drop` from `server`'s file (the
        file goes when nothing is left); how many were removed."""
        path = self.path_for(target, server)
        with _directory_lock(path.parent):
            current = self._read(target, server)
            if current is None:
                return 0
            removed = 0
            for concurrency, key in drop:
                if current.entries.get(concurrency, {}).pop(key, None) is not None:
                    removed += 1
            current.entries = {c: at for c, at in current.entries.items() if at}
            if not current.entries:
                path.unlink()
            elif removed:
                atomic_write_text(path, current.to_json())
            return removed

    # -- published reference figures --

    def load_published(self, server: str) -> PublishedFile | None:
        path = self.published_path_for(server)
        if not path.exists():
            return None
        doc = read_json(path)
        check_header(path, doc, {"kind": "published-reference", "server": sanitize_name(server)}, (PUBLISHED_FORMAT,))
        return PublishedFile(path=path, server=doc["server"], entries=published_entries(path, doc))

    def write_published(
        self, server: str, concurrency: int, figures: Mapping[str, float], source: str, note: str = ""
    ) -> PublishedFile:
        """Store report-only reference figures (e.g. the seeds' decode 407.9 tok/s at conc 32)."""
        concurrency = positive_concurrency(concurrency)
        if not source or not source.strip():
            raise ValueError("published figures need a source (where they were published)")
        try:
            clean = {k: stable_float(v) for k, v in figures.items()}
        except ValueError as exc:
            raise ValueError(f"published figures: {exc}") from None
        path = self.published_path_for(server)
        with _directory_lock(path.parent):
            current = self.load_published(server) or PublishedFile(path, sanitize_name(server))
            current.entries[concurrency] = {"figures": clean, "note": note, "source": source}
            atomic_write_text(current.path, current.to_json())
        return current
