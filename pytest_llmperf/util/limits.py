"""Open-file limits. Each measured stream holds a socket, so a run at concurrency N needs
N file descriptors beside those the process already has; past RLIMIT_NOFILE every new
socket fails with EMFILE ("Too many open files"), deep inside asyncio or ssl.

`open_files_for(concurrency)` raises the soft limit for one run when the streams would
not fit under it, never above the hard limit, and puts it back after: the soft limit is
the one a process is meant to raise for itself (vLLM's server raises its own to 65535),
while the hard limit is the administrator's. Only for the run, only when needed, and not
to the hard limit itself: child processes inherit the limit, and a program using
select() breaks on descriptors above 1024. Where even the hard limit is too low,
`too_many_open_files` says so in one line with the fix.
"""

from __future__ import annotations

import errno
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

# Beside the streams: /metrics scrapes and /health (each a socket and a CA bundle read),
# pipes to the simulator and to client workers, log files, the interpreter's own.
FD_MARGIN = 64


def is_too_many_open_files(exc: BaseException) -> bool:
    """EMFILE (this process's limit) or ENFILE (the system's)."""
    return isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)


def open_files_limit() -> tuple[int, int]:
    """RLIMIT_NOFILE as (soft, hard); RLIM_INFINITY for no limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft, hard


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
