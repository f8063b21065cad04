"""Who owns a container (host, boot id, pid namespace, pid and start time, from /proc),
and whether that process still runs: only checkable on the same machine, where a reused
pid is told apart by its start time. Without /proc, the pid alone is checked.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_STARTTIME = 19  # /proc/PID/stat field 22 (starttime, clock ticks after boot), counted after the ")"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str = ""  # the process's start time in clock ticks after boot ("" where unknown)
    boot: str = ""  # the kernel's boot id ("" where unknown)
    pidns: str = ""  # the pid namespace, e.g. "pid:[4026531836]" ("" where unknown)

    def same_machine(self, other: Owner) -> bool:
        """Whether a pid of `other` names a process this one can look at."""
        return (self.host, self.boot, self.pidns) == (other.host, other.boot, other.pidns)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (which may hold ")"), or None."""
    text = _read(PROC / str(pid) / "stat")
    if text is None or ")" not in text:
        return None
    return text.rsplit(")", 1)[1].split()


def _has_proc() -> bool:
    return (PROC / "self" / "stat").exists()


def process_start(pid: int) -> str:
    """The process's start time as /proc gives it (clock ticks after boot); "" where unknown."""
    fields = _stat(pid)
    return fields[_STARTTIME] if fields and len(fields) > _STARTTIME else ""


def current_owner() -> Owner:
    """This process, as a container's labels record it."""
    pid = os.getpid()
    try:
        pidns = os.readlink(PROC / "self" / "ns" / "pid")
    except OSError:
        pidns = ""
    boot = (_read(PROC / "sys" / "kernel" / "random" / "boot_id") or "").strip()
    return Owner(host=socket.gethostname(), pid=pid, start=process_start(pid), boot=boot, pidns=pidns)


def process_name(pid: int) -> str:
    """The short program name (/proc/PID/comm: no arguments, so no secrets); "" where unknown."""
    return (_read(PROC / str(pid) / "comm") or "").strip()


def is_running(owner: Owner) -> bool:
    """Whether `owner`'s process still runs (on the same machine): not a zombie, and started
    at the recorded time."""
    if owner.pid <= 0:
        return False
    if _has_proc():
        fields = _stat(owner.pid)
        if not fields or fields[0] in ("Z", "X"):
            return False
        return not owner.start or (len(fields) > _STARTTIME and fields[_STARTTIME] == owner.start)
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True
