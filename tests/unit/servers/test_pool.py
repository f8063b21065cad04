"""ServerPool: one server at a time; an endpoint someone else runs is used, never said
to start or stop."""

from contextlib import contextmanager

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.pool import ServerPool
from pytest_llmperf.servers.spec import ServerSpec

A, B = ServerSpec(name="a", model="org/a"), ServerSpec(name="b", model="org/b")


class Target:
    def __init__(self, name, starts_servers):
        self.name, self.starts_servers = name, starts_servers

    @contextmanager
    def start(self, spec):
        yield Endpoint("http://127.0.0.1:8000", spec.model_id, self.name, {})


def test_servers_it_starts_are_said_to_start_and_stop():
    lines = []
    pool = ServerPool(Target("sim", True), log=lines.append)
    pool.endpoint(A)
    pool.endpoint(B)
    pool.stop()
    assert lines == ["starting server a (sim)", "stopping server a", "starting server b (sim)", "stopping server b"]
    assert (pool.starts, pool.attached) == (["a", "b"], [])


def test_an_external_endpoint_is_used_not_started_or_stopped():
    lines = []
    pool = ServerPool(Target("external", False), log=lines.append)
    pool.endpoint(A)
    pool.stop()
    assert lines == ["server a: using http://127.0.0.1:8000 (external: run by someone else)"]
    assert (pool.starts, pool.attached) == ([], ["a"])
