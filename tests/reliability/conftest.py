"""The fault suite (issue 14): broken runs, bad input, signals, secrets, sessions.

Each file covers one kind of fault, asserting on both the outcome and the message a
user reads. At the end of the session, `nothing_left_behind` checks that no process
and no container this suite started is still there.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from pytest_llmperf.servers.leftovers import PLUGIN_FILTER, owner_from_labels
from pytest_llmperf.servers.owners import Owner, is_running
from tests.plugin_project import make_project

# Every process this session starts inherits this tag, whichever parent it ends up with.
TAG_VAR = "LLMPERF_RELIABILITY_TAG"


# multiprocessing's resource tracker lives as long as the process that first spawned
# (client workers do): it is this process's helper, not a leftover.
HELPERS = ("multiprocessing.resource_tracker",)


def tagged_processes(tag: str) -> dict[int, str]:
    """Live processes (not zombies, not this one, not its multiprocessing helpers) whose
    environment carries `tag`."""
    found = {}
    needle = f"{TAG_VAR}={tag}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not any(helper in cmdline for helper in HELPERS):
            found[int(entry.name)] = cmdline.strip()
    return found


def plugin_containers() -> dict[str, Owner | None] | None:
    """This plugin's containers by name, with their owners; None when no Docker engine answers."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
    except Exception:  # noqa: BLE001 - no engine here: nothing to check
        return None
    found = client.containers.list(all=True, filters={"label": PLUGIN_FILTER}, ignore_removed=True)
    return {c.name: owner_from_labels(c.labels or {}) for c in found}


def ours(owner: Owner | None, tag: str) -> bool:
    """Started by this suite: by this process, a tagged one, or an owner now gone. A live
    owner outside the suite is another session on a shared engine, not a leak of ours."""
    if owner is None or owner.pid == os.getpid() or owner.pid in tagged_processes(tag):
        return True
    return not is_running(owner)


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    tag = uuid.uuid4().hex
    os.environ[TAG_VAR] = tag
    containers_before = plugin_containers()
    yield
    deadline = time.monotonic() + 10  # a stopped server may take a moment to exit
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes this suite started are still running: {left}"
    if containers_before is not None:
        now = plugin_containers() or {}
        new = sorted(name for name, owner in now.items() if name not in containers_before and ours(owner, tag))
        assert not new, f"containers this suite started are still there: {new}"


@pytest.fixture
def project(pytester, monkeypatch, tmp_path_factory):
    return make_project(pytester, monkeypatch, tmp_path_factory)
