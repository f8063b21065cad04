"""Sessions never harm each other through Docker (issue 14: point 2, and the container
part of point 7), against the real engine and the local simulator image.

- A live session's container survives another session's `--llmperf-cleanup`, which
  says it kept it and why; the live session then tears down normally (it used to die
  with "409 ... removal of container ... is already in progress").
- A container of a killed session (`kill -9`: no handler runs) is reported by the next
  container session and removed by `--llmperf-cleanup`, which says why.
- A pid that now belongs to another process is not mistaken for the owner; containers
  whose owner cannot be checked (another host, no owner labels) go by age.

Every container started here is removed at the end, whatever happened.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from pytest_llmperf.servers import leftovers as lo
from pytest_llmperf.servers.owners import current_owner, process_start
from pytest_llmperf.servers.spec import ServerSpec
from tests.docker.conftest import engine_or_skip, ours, sim_image_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.docker]

PREFIX = "llmperf-test-sessions-"
TRIVIAL = "def test_nothing():\n    pass\n"
# Another session, as far as the engine can tell: a process serving a sim container
# through DockerTarget, as the plugin does, until told to finish (a line on stdin).
HOLDER = """
import sys
import threading
from pytest_llmperf.servers.docker import DockerTarget
from pytest_llmperf.servers.spec import ServerSpec

image, session = sys.argv[1:3]
spec = ServerSpec(name="held", model="sim/held-model", args=("--sim-speed", "50"))
target = DockerTarget(image_override=image, hf_cache=None, ready_timeout=120, session_id=session, stop_timeout=5)
with target.start(spec) as endpoint:
    print("READY", endpoint.base_url, flush=True)
    sys.stdin.readline()
print("EXITED NORMALLY", flush=True)
"""


@pytest.fixture(scope="module")
def docker_client() -> Any:
    return engine_or_skip()


@pytest.fixture(scope="module")
def sim_image(docker_client: Any) -> str:
    return sim_image_or_skip(docker_client)


@pytest.fixture
def session_prefix(docker_client: Any) -> Iterator[str]:
    """A session label prefix for this test; every container carrying it is removed afterwards."""
    prefix = f"{PREFIX}{uuid.uuid4().hex[:8]}-"
    yield prefix
    for c in ours(docker_client, prefix):
        c.remove(force=True, v=True)


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes holding a container; killed afterwards if a test left one running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def hold(holders: list[subprocess.Popen[str]], image: str, session: str) -> tuple[subprocess.Popen[str], str]:
    """A holding process once its server is ready, and the server's base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, image, session],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    holders.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        pytest.fail(f"the holding process did not get ready: {line}{proc.stdout.read()}")
    return proc, line.split()[1]


def another_session(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Another pytest session on this host: its own process, as a user runs it."""
    pytester.makepyfile(test_trivial=TRIVIAL)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:benchmark", *args, timeout=120)


def the_container(client: Any, session: str) -> Any:
    (container,) = ours(client, session)
    return container


def test_a_live_sessions_container_survives_another_sessions_cleanup(
    pytester, docker_client, sim_image, session_prefix, holders
):
    session = f"{session_prefix}live"
    victim, base_url = hold(holders, sim_image, session)
    container = the_container(docker_client, session)

    cleanup = another_session(pytester, "--llmperf-cleanup")
    cleanup.assert_outcomes(passed=1)
    cleanup.stdout.fnmatch_lines(
        [
            "[[]llmperf] --llmperf-cleanup: removed * container(s), kept *",
            f"[[]llmperf]   kept {container.name} (spec held, model sim/held-model, gpu 0, running, "
            f"session {session}): owned by live pytest pid {victim.pid}* on this host",
        ]
    )
    assert f"removed {container.name}" not in cleanup.stdout.str()

    # The victim's server still serves, and the victim ends as it would have: its own
    # teardown removes the container, with no error.
    container.reload()
    assert container.status == "running"
    assert httpx.get(f"{base_url}/health", timeout=10).status_code == 200
    out, _ = victim.communicate("done\n", timeout=60)
    assert victim.returncode == 0, out
    assert out.strip() == "EXITED NORMALLY"  # no 409, no traceback
    assert ours(docker_client, session) == []


def test_a_killed_sessions_container_is_reported_by_the_next_session_and_removed_by_cleanup(
    pytester, docker_client, sim_image, session_prefix, holders
):
    session = f"{session_prefix}killed"
    killed, _ = hold(holders, sim_image, session)
    killed.kill()  # SIGKILL: no handler runs, the container stays
    killed.wait(timeout=30)
    container = the_container(docker_client, session)
    described = f"{container.name} (spec held, model sim/held-model, gpu 0, running, session {session})"
    why = f"its owner, pid {killed.pid} on this host, is gone"

    # The next container session says so at its start, and removes nothing itself.
    noticed = another_session(pytester, "--llmperf-docker")
    noticed.assert_outcomes(passed=1)
    noticed.stdout.fnmatch_lines(
        [
            "[[]llmperf] * container(s) left by sessions that are gone; remove with pytest --llmperf-cleanup:",
            f"[[]llmperf]   {described}: {why}",
        ]
    )
    assert the_container(docker_client, session).id == container.id

    cleanup = another_session(pytester, "--llmperf-cleanup")
    cleanup.assert_outcomes(passed=1)
    cleanup.stdout.fnmatch_lines([f"[[]llmperf]   removed {described}: {why}"])
    assert ours(docker_client, session) == []

    # Nothing left of it: the session after says nothing about it.
    after = another_session(pytester, "--llmperf-docker")
    assert container.name not in after.stdout.str()


def make_container(client: Any, image: str, session: str, name: str, labels: dict[str, str]) -> Any:
    """A container (created, never started) carrying `labels`: an owner that cannot be
    live, another host's, or none, without having to run those sessions."""
    return client.containers.create(image, command=["sim/model"], name=f"{session}{name}", labels=labels)


def test_who_owns_it_decides_and_cleanup_says_so_for_each(pytester, docker_client, sim_image, session_prefix):
    spec = ServerSpec(name="labelled", model="sim/labelled")
    me = current_owner()
    day = 24 * 3600.0

    def labels(name: str, **kwargs: Any) -> dict[str, str]:
        return lo.container_labels(session_prefix + name, spec, False, **kwargs)

    # This pid runs (it is this test's process), but not the process that started then.
    reused = dataclasses.replace(me, start=str(int(process_start(me.pid) or "1") + 1))
    elsewhere = dataclasses.replace(me, host="another-box", pid=4321)
    recorded_by_older_versions = ("io.pytest-llmperf.owner", lo.LABEL_CREATED)
    unlabelled = {k: v for k, v in labels("old-version").items() if not k.startswith(recorded_by_older_versions)}
    made = {
        "reused": make_container(docker_client, sim_image, session_prefix, "reused", labels("reused", owner=reused)),
        "far-young": make_container(
            docker_client, sim_image, session_prefix, "far-young", labels("far-young", owner=elsewhere)
        ),
        "far-old": make_container(
            docker_client,
            sim_image,
            session_prefix,
            "far-old",
            labels("far-old", owner=elsewhere, created=time.time() - 2 * day),
        ),
        "old-version": make_container(docker_client, sim_image, session_prefix, "old-version", unlabelled),
    }

    cleanup = another_session(pytester, "--llmperf-cleanup")
    cleanup.assert_outcomes(passed=1)
    out = cleanup.stdout.str()
    name = {key: c.name for key, c in made.items()}
    cleanup.stdout.fnmatch_lines_random(
        [
            f"*removed {name['reused']} (*): its owner, pid {me.pid} on this host, is gone",
            f"*removed {name['far-old']} (*): owned by pid 4321 on host another-box, which cannot be checked from "
            "here; created 2d ago, older than 24h (--llmperf-cleanup-age)",
            f"*kept {name['far-young']} (*): owned by pid 4321 on host another-box, which cannot be checked from "
            "here; created *s ago, removed once older than 24h (--llmperf-cleanup-age)",
            f"*kept {name['old-version']} (*): no owner labels (made by an older version of the plugin); created *s "
            "ago, removed once older than 24h (--llmperf-cleanup-age)",
        ]
    )
    left = {c.name for c in ours(docker_client, session_prefix)}
    assert left == {name["far-young"], name["old-version"]}, out

    # A shorter age limit: what cannot be checked and is older than that goes too.
    time.sleep(2)
    shorter = another_session(pytester, "--llmperf-cleanup", "--llmperf-cleanup-age", "1s")
    shorter.assert_outcomes(passed=1)
    shorter.stdout.fnmatch_lines_random(
        [f"*removed {name['far-young']} (*): *older than 1s*", f"*removed {name['old-version']} (*): *older than 1s*"]
    )
    assert ours(docker_client, session_prefix) == []


def test_cleanup_skips_containers_removed_while_it_lists_them(docker_client, sim_image, session_prefix):
    # Containers another cleanup removes one every 0.05 s while this one lists and removes:
    # the docker SDK lists ids, then inspects each; one gone between the two used to end
    # the session with INTERNALERROR 404 and nothing removed.
    spec = ServerSpec(name="racing", model="sim/racing")
    gone = dataclasses.replace(current_owner(), host="another-box", pid=4321)
    made = [
        make_container(
            docker_client,
            sim_image,
            session_prefix,
            f"race-{i}",
            lo.container_labels(f"{session_prefix}race-{i}", spec, False, owner=gone, created=time.time() - 2 * 86400),
        )
        for i in range(40)
    ]
    remover_done = threading.Event()

    def remove_them() -> None:
        for container in reversed(made):
            try:
                container.remove(force=True, v=True)
            except Exception:  # noqa: BLE001 - the cleanup got there first
                pass
            time.sleep(0.05)
        remover_done.set()

    remover = threading.Thread(target=remove_them, daemon=True)
    remover.start()
    rounds = 0
    while not remover_done.is_set():
        lo.cleanup_lines(*lo.cleanup_leftovers(docker_client))  # raised docker.errors.NotFound
        lo.survey(docker_client)
        rounds += 1
    remover.join(timeout=30)
    assert rounds >= 1
    assert ours(docker_client, session_prefix) == []
