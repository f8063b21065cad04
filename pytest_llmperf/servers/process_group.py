"""A server process in its own process group (vLLM forks an engine core): the group
stopped as a whole, and its members listed."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def stop_process_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the whole group (the engine core can outlive the leader), SIGKILL what is
    left after `grace` s, reap the leader."""
    pgid = process.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()  # reap the leader so it does not keep the group alive as a zombie
        if process.returncode is not None and not group_members(pgid):
            return
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
        pass
    end = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < end:
        time.sleep(0.1)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are not zombies (for tests and diagnostics)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state, fields[2] the process group id.
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids
