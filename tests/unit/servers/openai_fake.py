"""A scripted OpenAI-compatible server for the readiness, provenance and external-target
tests: `/health`, `/v1/models` and `/version` as the test sets them, on a random free
port of 127.0.0.1 (stdlib http.server in a thread), with every path it was asked for."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeOpenAIServer:
    def __init__(self, models: tuple[str, ...] = ("m",), max_model_len: int | None = 4096) -> None:
        self.models = list(models)  # the ids /v1/models lists
        self.max_model_len = max_model_len  # None: not in the model entries
        self.models_status = 200
        self.models_body: bytes | None = None  # raw /v1/models body instead of the listing
        self.health_status = 200
        self.unhealthy_polls = 0  # /health answers 503 this many times first
        self.version: str | None = "0.11.1"  # None: /version answers 404
        self.paths: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def __enter__(self) -> FakeOpenAIServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.paths.append(self.path)
                status, body = fake._answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _answer(self, path: str) -> tuple[int, bytes]:
        if path == "/health":
            if self.unhealthy_polls > 0:
                self.unhealthy_polls -= 1
                return 503, b""
            return self.health_status, b""
        if path == "/v1/models":
            if self.models_body is not None:
                return self.models_status, self.models_body
            entries = []
            for model in self.models:
                entry: dict[str, Any] = {"id": model, "object": "model", "owned_by": "vllm"}
                if self.max_model_len is not None:
                    entry["max_model_len"] = self.max_model_len
                entries.append(entry)
            return self.models_status, json.dumps({"object": "list", "data": entries}).encode()
        if path == "/version" and self.version is not None:
            return 200, json.dumps({"version": self.version}).encode()
        return 404, json.dumps({"detail": "Not Found"}).encode()


def unused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (a port just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
