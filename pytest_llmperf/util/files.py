"""Files and cache folders."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CACHE_DIR_ENV = "LLMPERF_CACHE_DIR"


def is_read_only(path: Path) -> bool:
    """Whether `path` is a file nobody may write by its mode (chmod 444), which even root respects here."""
    try:
        return path.is_file() and not path.stat().st_mode & 0o222
    except OSError:
        return False


def write_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `atomic_write_text(path, ...)` would fail (found by trying a temp file), or None."""
    path = Path(path)
    if is_read_only(path):
        return f"it is read-only (mode {path.stat().st_mode & 0o777:o}); make it writable to record over it"
    if path.exists() and not os.access(path, os.W_OK):
        return "it is not writable by this user"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".llmperf-probe-")
    except OSError as exc:
        return f"no file can be written in {folder}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) via a temp file, fsync and `os.replace`: a reader sees the old
    file or the new one, never half. The mode is a plain `open()`'s; a read-only file
    raises PermissionError and is never replaced."""
    path = Path(path)
    if is_read_only(path):
        raise PermissionError(f"{path} is read-only (mode {path.stat().st_mode & 0o777:o}): not replaced")
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix, suffix = f".{path.name}.", ".tmp"
    for stray in path.parent.glob(f"{prefix}*{suffix}"):  # from a process killed mid-write
        stray.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=suffix)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def cache_root() -> Path:
    """$LLMPERF_CACHE_DIR, else ~/.cache/pytest-llmperf: token counts, prepared vLLM builds."""
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pytest-llmperf"


def token_counts_dir() -> Path:
    """Where `/tokenize` counts are cached, for the plugin and `llmperf bench` alike."""
    return cache_root() / "token-counts"


def relative_to(path: Path, root: Path) -> str:
    """`path` as written under `root`, or as given where it lies outside it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
