"""Who owns a container, and whether that process is still there.

A container records the process that started it (servers/leftovers.py puts this in its
labels): the host name, the kernel's boot id, the pid namespace, the pid, and that
process's start time. A process on the same machine (same name, same boot, same pid
namespace, so the pid means the same process) can tell whether the owner still runs:
the pid is alive, not a zombie, and started at the recorded time, so a pid the kernel
handed to another process since is not mistaken for the owner. From anywhere else (a
remote engine shared by several machines, a CI job in another pid namespace) the owner
cannot be checked, and leftovers.py falls back to the container's age.

Linux reads all of this from /proc. Elsewhere the boot id, namespace and start time are
unknown (""): the pid alone is checked, and a reused pid keeps a leftover (never the
other way round).
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
    """/proc/PID/stat's fields after the command name (field 3 on), or None when no such
    process is there. The name is in parentheses and may hold spaces and ")"."""
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
    """Whether `owner`'s process still runs. Only meaningful on the same machine
    (`Owner.same_machine`). A zombie has finished; a pid that started at another time
    than recorded is another process."""
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
