"""owners.py: this process as a container's owner, and whether an owner still runs
(a live process, a finished one, a zombie, a pid the kernel gave to another process)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_llmperf.servers import owners
from pytest_llmperf.servers.owners import Owner, current_owner, is_running, process_start

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def finished_pid() -> int:
    """A pid whose process has exited and been reaped."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


@linux_only
def test_this_process_is_recorded_with_what_tells_it_apart():
    me = current_owner()
    assert me.host == socket.gethostname() and me.pid == os.getpid()
    assert me.start.isdigit() and me.start == process_start(os.getpid())
    assert len(me.boot) == 36  # the kernel's boot id, a UUID
    assert me.pidns.startswith("pid:[")
    assert me == current_owner()  # stable: the labels of every container of this process agree


def test_same_machine_needs_host_boot_and_pid_namespace_alike():
    me = Owner("box", 10, "99", "boot-a", "pid:[1]")
    assert me.same_machine(Owner("box", 20, "5", "boot-a", "pid:[1]"))
    assert not me.same_machine(Owner("other", 10, "99", "boot-a", "pid:[1]"))
    assert not me.same_machine(Owner("box", 10, "99", "boot-b", "pid:[1]"))  # rebooted, or a twin machine
    assert not me.same_machine(Owner("box", 10, "99", "boot-a", "pid:[2]"))  # a container's own pids


def test_a_running_process_is_running():
    assert is_running(current_owner())
    parent = Owner(socket.gethostname(), os.getppid(), process_start(os.getppid()))
    assert is_running(parent)


def test_a_finished_process_is_not():
    assert not is_running(Owner(socket.gethostname(), finished_pid()))


@linux_only
def test_a_pid_now_held_by_another_process_is_not_the_owner():
    # The parent runs, but it started at another time than recorded: the pid was reused.
    ppid = os.getppid()
    wrong_start = str(int(process_start(ppid)) + 1)
    assert not is_running(Owner(socket.gethostname(), ppid, wrong_start))


@linux_only
def test_a_zombie_is_not_running():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while (Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z") and (
            time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert not is_running(Owner(socket.gethostname(), child.pid))  # exited, not yet reaped
    finally:
        child.wait()


def test_no_pid_is_never_running():
    assert not is_running(Owner("box", 0))
    assert not is_running(Owner("box", -1))


def test_without_proc_the_pid_alone_is_checked(monkeypatch, tmp_path):
    monkeypatch.setattr(owners, "PROC", tmp_path)  # as on macOS: no /proc
    me = current_owner()
    assert (me.start, me.boot, me.pidns) == ("", "", "")
    assert is_running(me)
    assert not is_running(Owner(me.host, finished_pid()))
    calls = []

    def kill(pid, sig):
        calls.append((pid, sig))
        raise PermissionError  # another user's process: it exists

    monkeypatch.setattr(os, "kill", kill)
    assert is_running(Owner(me.host, 1))
    assert calls == [(1, 0)]  # signal 0: only asks whether it exists
