"""DOCKER_HOST is respected: the target reaches the engine through tcp:// (a relay on
127.0.0.1 to the engine's socket stands in for a remote box's daemon port)."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest

from pytest_llmperf.servers.spec import ServerSpec

pytestmark = [pytest.mark.docker, pytest.mark.slow]


class TcpToUnixRelay:
    """Accepts on 127.0.0.1:<free port>, forwards each connection to a unix socket."""

    def __init__(self, unix_path: str) -> None:
        self.unix_path = unix_path
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self._listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.unix_path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self._listener.close()


@pytest.fixture
def engine_socket(docker_client: Any) -> str:
    base = docker_client.api.base_url
    path = (os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock").removeprefix("unix://")
    if not base.startswith("http+docker://") or not os.path.exists(path):
        pytest.skip(f"the engine is not on a local unix socket ({base})")
    return path


def test_docker_host_tcp_is_used(make_target, engine_socket):
    relay = TcpToUnixRelay(engine_socket)
    try:
        environ = {**os.environ, "DOCKER_HOST": relay.url}
        target = make_target(client=None, environ=environ)
        spec = ServerSpec(name="via-tcp", model="sim/via-tcp", args=("--sim-speed", "50"))
        with target.start(spec) as endpoint:
            assert endpoint.base_url.startswith("http://127.0.0.1:")  # a local engine: loopback
            assert target.client().api.base_url == relay.url.replace("tcp://", "http://")
            used = relay.connections
        assert used >= 1
    finally:
        relay.close()
