"""A Unix-socket forwarder: `python socket_proxy.py LISTEN TARGET` forwards every
connection on LISTEN to TARGET (this machine's Docker socket), printing "ready" once it
listens. A test gives its URL as DOCKER_HOST and kills the process to play a remote
box's engine dying: open connections drop, new ones are refused."""

from __future__ import annotations

import socket
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main() -> None:
    listen, target = sys.argv[1], sys.argv[2]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(listen)
    server.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(target)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


if __name__ == "__main__":
    main()
