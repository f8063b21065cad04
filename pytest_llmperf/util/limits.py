"""Open-file limits: each measured stream holds a socket. `open_files_for` raises the soft
RLIMIT_NOFILE for one run when needed (within the hard limit, then puts it back);
`too_many_open_files` says how to fix a run that ran out.
"""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

FD_MARGIN = 64  # beside the streams: scrapes, pipes, log files, the interpreter's own


def is_too_many_open_files(exc: BaseException) -> bool:
    """EMFILE (this process's limit) or ENFILE (the system's)."""
    return isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)


def open_files_limit() -> tuple[int, int]:
    """RLIMIT_NOFILE as (soft, hard); RLIM_INFINITY for no limit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def open_fds() -> int:
    """File descriptors this process has open now (0 where the system does not say)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(len(os.listdir(folder)) - 1, 0)  # less the one listdir opened
        except OSError:
            continue
    return 0


def fds_needed(concurrency: int) -> int:
    return open_fds() + concurrency + FD_MARGIN


def _fits(needed: int, limit: int) -> bool:
    return limit == resource.RLIM_INFINITY or needed <= limit


def _show(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


@contextmanager
def open_files_for(concurrency: int) -> Iterator[tuple[int, int] | None]:
    """Within the block, a soft RLIMIT_NOFILE that fits `concurrency` streams, if the hard
    limit allows; yields (soft before, soft within) when it raised it, else None."""
    soft, hard = open_files_limit()
    needed = fds_needed(concurrency)
    if _fits(needed, soft):
        yield None
        return
    target = -(-needed // 1024) * 1024  # a round number above what is needed
    raised = target if _fits(target, hard) else hard
    if raised <= soft:  # the hard limit leaves no room: the run says so if it runs out
        yield None
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    except (ValueError, OSError):  # not allowed here: the run says so if it runs out
        yield None
        return
    try:
        yield soft, raised
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def too_many_open_files(concurrency: int) -> str:
    """The one-line message for a run that ran out of file descriptors."""
    soft, hard = open_files_limit()
    needed = fds_needed(concurrency)
    # Enough for the streams, and more than the limit that just ran out.
    suggest = max(-(-needed // 1024) * 1024, 4096, 0 if soft == resource.RLIM_INFINITY else 2 * soft)
    beyond_hard = "" if _fits(suggest, hard) else " (above the hard limit: as root, or in /etc/security/limits.conf)"
    return (
        f"too many open files at concurrency {concurrency} (each stream holds a socket): RLIMIT_NOFILE is "
        f"soft {_show(soft)}, hard {_show(hard)}; raise it before pytest, e.g. `ulimit -n {suggest}`"
        f"{beyond_hard}, or lower the concurrency"
    )
