"""Leftover containers against a fake engine: owner labels, the rule --llmperf-cleanup
removes by (owner gone on this host; elsewhere or unlabelled: older than the age limit),
and what it says about each container it removes or keeps."""

from __future__ import annotations

import dataclasses
import os
import time
from datetime import datetime, timezone
from typing import Any

import docker.errors
import pytest
import requests

from pytest_llmperf.servers import docker as dk
from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.owners import Owner, current_owner, process_start
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.servers.teardown import remove_container
from tests.unit.servers.test_docker import SEED, FakeClient, FakeContainer

NOW = 1_750_000_000.0
HOUR = 3600.0
ME = Owner("ci-box", 4242, "777", "boot-1", "pid:[1]")
LIVE = Owner("ci-box", 1234, "555", "boot-1", "pid:[1]")  # another session on this host, running
DEAD = Owner("ci-box", 999, "333", "boot-1", "pid:[1]")  # killed with -9
REMOTE = Owner("laptop", 1234, "555", "boot-9", "pid:[1]")  # shares the engine through DOCKER_HOST


def alive(owner: Owner) -> bool:
    return owner == LIVE


def container(
    client: FakeClient, name: str, owner: Owner | None, age: float, spec: ServerSpec = SEED, gpu: bool = False
) -> FakeContainer:
    labels = lo.container_labels(f"s-{name}", spec, gpu, owner=owner or ME, created=NOW - age)
    if owner is None:  # made by a version that recorded no owner and no time
        labels = {k: v for k, v in labels.items() if not k.startswith(("io.pytest-llmperf.owner", lo.LABEL_CREATED))}
    c = FakeContainer(client, name, labels, fail_start=False)
    c.status = "exited"
    # The engine's own record, which is all an unlabelled container has: inspect's form.
    c.attrs["Created"] = datetime.fromtimestamp(NOW - age, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.123456789Z")
    client.containers.items.append(c)
    return c


def judged(c: FakeContainer, max_age: float = 24 * HOUR) -> lo.Judgement:
    return lo.judge(c, max_age, me=ME, now=NOW, alive=alive)


# ----------------------------------------------------------------------------- labels


def test_labels_record_the_owner_and_the_creation_time():
    labels = lo.container_labels("sess", SEED, gpu=True, owner=LIVE, created=NOW)
    assert labels[lo.LABEL_OWNER_HOST] == "ci-box"
    assert labels[lo.LABEL_OWNER_PID] == "1234"
    assert labels[lo.LABEL_OWNER_START] == "555"
    assert labels[lo.LABEL_OWNER_BOOT] == "boot-1" and labels[lo.LABEL_OWNER_PIDNS] == "pid:[1]"
    assert labels[lo.LABEL_CREATED] == "2025-06-15T15:06:40Z"
    assert lo.owner_from_labels(labels) == LIVE
    assert all(isinstance(v, str) for v in labels.values())  # Docker takes string labels only


def test_labels_default_to_this_process_and_now():
    labels = lo.container_labels("sess", SEED, gpu=False)
    assert lo.owner_from_labels(labels) == current_owner()
    assert labels[lo.LABEL_OWNER_PID] == str(os.getpid())
    c = FakeContainer(FakeClient(), "x", labels, fail_start=False)
    assert abs(lo.created_at(c) - time.time()) < 5


@pytest.mark.parametrize(
    "labels",
    [{}, {lo.LABEL_OWNER_HOST: "box"}, {lo.LABEL_OWNER_HOST: "box", lo.LABEL_OWNER_PID: "x"}],
    ids=["none", "no pid", "bad pid"],
)
def test_no_usable_owner_labels_read_as_no_owner(labels):
    assert lo.owner_from_labels(labels) is None


def test_creation_time_from_the_label_else_from_the_engine():
    c = FakeContainer(FakeClient(), "x", {}, fail_start=False)
    assert lo.created_at(c) is None
    c.attrs["Created"] = "2025-06-15T15:06:40.123456789Z"  # inspect's form: nanoseconds
    assert lo.created_at(c) == NOW
    c.attrs["Created"] = int(NOW)  # the list endpoint's form
    assert lo.created_at(c) == NOW
    c.labels = {lo.LABEL_CREATED: "2025-06-15T16:06:40Z"}
    assert lo.created_at(c) == NOW + HOUR


@pytest.mark.parametrize(
    "seconds, shown", [(45, "45s"), (600, "10m"), (30 * 60, "30m"), (24 * HOUR, "24h"), (3 * 86400, "3d")]
)
def test_durations_are_shown_in_the_unit_that_fits(seconds, shown):
    assert lo.format_duration(seconds) == shown


# ----------------------------------------------------------------------------- the rule


def test_a_live_sessions_container_on_this_host_is_kept_however_old():
    c = container(FakeClient(), "busy", LIVE, age=30 * 86400)
    j = judged(c)
    assert not j.leftover
    assert j.reason.startswith("owned by live pytest pid 1234") and j.reason.endswith("on this host")


def test_a_dead_owners_container_on_this_host_is_a_leftover_however_young():
    j = judged(container(FakeClient(), "killed", DEAD, age=5))
    assert j.leftover and j.reason == "its owner, pid 999 on this host, is gone"


def test_this_process_own_container_is_kept():
    j = judged(container(FakeClient(), "mine", ME, age=5))
    assert not j.leftover and j.reason == "owned by this process (pid 4242)"


def test_a_reused_pid_is_not_the_owner():
    # pid 1234 runs, but not the process that started at tick 111: the owner is gone.
    reused = Owner("ci-box", 1234, "111", "boot-1", "pid:[1]")
    assert judged(container(FakeClient(), "old", reused, age=5)).leftover


@pytest.mark.parametrize(
    "owner, whose",
    [
        (REMOTE, "owned by pid 1234 on host laptop, which cannot be checked from here"),
        (
            Owner("ci-box", 1234, "555", "boot-0", "pid:[1]"),
            "owned by pid 1234 on ci-box in another boot or pid namespace, which cannot be checked",
        ),
        (
            Owner("ci-box", 1234, "555", "boot-1", "pid:[7]"),
            "owned by pid 1234 on ci-box in another boot or pid namespace, which cannot be checked",
        ),
        (None, "no owner labels (made by an older version of the plugin)"),
    ],
    ids=["another host", "another boot", "another pid namespace", "no owner labels"],
)
def test_an_owner_that_cannot_be_checked_is_judged_by_age(owner, whose):
    client = FakeClient()
    young = judged(container(client, "young", owner, age=2 * HOUR))
    assert not young.leftover
    assert young.reason == f"{whose}; created 2h ago, removed once older than 24h (--llmperf-cleanup-age)"
    old = judged(container(client, "old", owner, age=3 * 86400))
    assert old.leftover
    assert old.reason == f"{whose}; created 3d ago, older than 24h (--llmperf-cleanup-age)"
    # A shorter limit: the same young container is now old enough.
    assert judged(container(client, "young2", owner, age=2 * HOUR), max_age=30 * 60).leftover


def test_an_unlabelled_container_of_unknown_age_is_kept():
    c = container(FakeClient(), "ancient", None, age=0)
    c.attrs.pop("Created", None)
    j = judged(c)
    assert not j.leftover and j.reason.endswith("its age is unknown, so it is kept")


# ----------------------------------------------------------------------------- cleanup and notices


def cleanup(client: FakeClient, **kwargs: Any) -> tuple[list[lo.Judgement], list[lo.Judgement]]:
    return lo.cleanup_leftovers(client, 24 * HOUR, me=ME, now=NOW, alive=alive, **kwargs)


def test_cleanup_removes_only_leftovers_and_says_what_it_kept_and_why():
    client = FakeClient()
    busy = container(client, "llmperf-busy-1", LIVE, age=40 * HOUR, gpu=True)
    killed = container(client, "llmperf-killed-1", DEAD, age=HOUR)
    far = container(client, "llmperf-far-1", REMOTE, age=HOUR)
    stale = container(client, "llmperf-stale-1", REMOTE, age=50 * HOUR)
    foreign = FakeContainer(client, "not-ours", {"app": "other"}, fail_start=False)
    client.containers.items.append(foreign)

    removed, kept = cleanup(client)
    assert [j.name for j in removed] == ["llmperf-killed-1", "llmperf-stale-1"]
    assert [j.name for j in kept] == ["llmperf-busy-1", "llmperf-far-1"]
    assert killed.removed and stale.removed and not busy.removed and not far.removed and not foreign.removed

    lines = lo.cleanup_lines(removed, kept)
    assert lines[0] == "--llmperf-cleanup: removed 2 container(s), kept 2"
    assert lines[1] == (
        "  removed llmperf-killed-1 (spec qwen3.6-27b-fp8-mtp, model Qwen/Qwen3.6-27B-FP8, gpu 0, exited, "
        "session s-llmperf-killed-1): its owner, pid 999 on this host, is gone"
    )
    assert lines[2].startswith("  removed llmperf-stale-1 (") and "older than 24h" in lines[2]
    assert lines[3].startswith("  kept llmperf-busy-1 (spec qwen3.6-27b-fp8-mtp, model Qwen/Qwen3.6-27B-FP8, gpu 1")
    assert "owned by live pytest pid 1234" in lines[3] and lines[3].endswith("on this host")
    assert lines[4].startswith("  kept llmperf-far-1 (") and "removed once older than 24h" in lines[4]


def test_cleanup_with_nothing_there_says_so():
    assert lo.cleanup_lines(*cleanup(FakeClient())) == ["--llmperf-cleanup: no containers of this plugin on the engine"]


def api_error(status: int, reason: str, explanation: str) -> docker.errors.APIError:
    """As the SDK raises it: the HTTP response and the engine's explanation."""
    response = requests.Response()
    response.status_code, response.reason, response.url = status, reason, "http+docker://localhost/containers/x"
    return docker.errors.APIError(f"{status} {reason}", response=response, explanation=explanation)


class Refusing(FakeContainer):
    error = docker.errors.APIError("conflict")

    def remove(self, force: bool = False, v: bool = False) -> None:
        raise self.error


def test_a_container_someone_else_is_removing_counts_as_removed_and_a_refusal_as_kept():
    client = FakeClient()
    going = Refusing(client, "going", lo.container_labels("s", SEED, False, owner=DEAD, created=NOW), False)
    going.error = api_error(409, "Conflict", "removal of container going is already in progress")
    stuck = Refusing(client, "stuck", lo.container_labels("s", SEED, False, owner=DEAD, created=NOW), False)
    stuck.error = api_error(500, "Internal Server Error", "device or resource busy")
    client.containers.items += [going, stuck]
    removed, kept = cleanup(client)
    assert [j.name for j in removed] == ["going"]
    (refused,) = kept
    assert refused.name == "stuck" and not refused.leftover
    assert refused.reason.startswith("its owner, pid 999 on this host, is gone; could not remove it: 500 Server")
    assert refused.reason.endswith('("device or resource busy")')


def test_leftover_notice_names_each_and_the_command_that_removes_them():
    client = FakeClient()
    container(client, "llmperf-busy-1", LIVE, age=HOUR)
    container(client, "llmperf-killed-1", DEAD, age=HOUR)
    found = lo.find_leftovers(client, 24 * HOUR, me=ME, now=NOW, alive=alive)
    assert [j.name for j in found] == ["llmperf-killed-1"]
    lines = lo.leftover_lines(found)
    assert lines[0] == "1 container(s) left by sessions that are gone; remove with pytest --llmperf-cleanup:"
    assert lines[1].startswith("  llmperf-killed-1 (spec qwen3.6-27b-fp8-mtp, model Qwen/Qwen3.6-27B-FP8")
    assert lines[1].endswith("its owner, pid 999 on this host, is gone")
    assert lo.leftover_lines([]) == []


def test_a_gpu_start_beside_a_leftover_says_to_clean_up_and_beside_a_live_session_says_to_wait():
    client = FakeClient(fail_start=False)
    dead = dataclasses.replace(current_owner(), pid=999_999_999)  # no such pid
    parent = dataclasses.replace(current_owner(), pid=os.getppid(), start=process_start(os.getppid()))  # runs
    client.containers.items.append(
        FakeContainer(client, "old", lo.container_labels("other", SEED, True, owner=dead), fail_start=False)
    )
    target = dk.DockerTarget(client=client, gpu=True, environ={})
    with pytest.raises(ServerStartError) as info:
        with target.start(SEED):
            pass
    message = str(info.value)
    assert "another GPU server of this plugin is still running: old (" in message
    assert "its owner, pid 999999999 on this host, is gone" in message
    assert message.endswith("only one runs at a time: remove leftovers with pytest --llmperf-cleanup first.")

    client.containers.items[:] = [
        FakeContainer(client, "busy", lo.container_labels("other", SEED, True, owner=parent), False)
    ]
    with pytest.raises(ServerStartError) as info:
        with target.start(SEED):
            pass
    assert f"owned by live pytest pid {os.getppid()}" in str(info.value)
    assert str(info.value).endswith("only one runs at a time: wait for the session that owns it to finish.")
    assert client.containers.create_kwargs == []


def test_teardown_survives_someone_else_removing_its_container():
    """The issue's victim died at its session's end with "409 ... removal of container ...
    is already in progress": cleanup no longer removes a live session's container, and a
    container that goes anyway (docker rm -f by hand) no longer kills the session."""
    going = Refusing(FakeClient(), "going", {}, False)
    going.error = api_error(409, "Conflict", "removal of container going is already in progress")
    remove_container(going)  # no error
    stuck = Refusing(FakeClient(), "stuck", {}, False)
    stuck.error = api_error(500, "Internal Server Error", "device or resource busy")
    with pytest.raises(docker.errors.APIError, match="500"):
        remove_container(stuck)  # anything else still says what went wrong
