"""A read-only Docker registry (distribution API v2) on 127.0.0.1 serving one local image.

No registry is reachable here, so the pull path (progress, repo digest) is tested against
this: `docker save` gives the image's config and layer tars; they are served as blobs
under a schema-2 manifest. Layers are served uncompressed (the engine detects
compression), so each blob's digest is also the layer's diff id.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MANIFEST_TYPE = "application/vnd.docker.distribution.manifest.v2+json"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


class LocalRegistry:
    """`with LocalRegistry(client, "some/image:tag", "llmperf/sim") as reg:` then pull
    `reg.ref("pulled")`; `reg.manifest_digest` is what the engine records."""

    def __init__(self, client: Any, source: str, repository: str) -> None:
        self.repository = repository
        self.requests: list[str] = []
        self._dir = Path(tempfile.mkdtemp(prefix="llmperf-registry-"))
        self._blobs: dict[str, Path] = {}
        self._export(client, source)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host}:{port}"

    def ref(self, tag: str) -> str:
        return f"{self.address}/{self.repository}:{tag}"

    def _export(self, client: Any, source: str) -> None:
        saved = self._dir / "image.tar"
        with saved.open("wb") as f:
            for chunk in client.images.get(source).save(named=False):
                f.write(chunk)
        with tarfile.open(saved) as tar:
            # The "data" filter exists from 3.11.4 / 3.12; our own image's tar needs no more.
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(self._dir / "x", **safe)
        saved.unlink()
        (entry,) = json.loads((self._dir / "x" / "manifest.json").read_text())
        config = self._dir / "x" / entry["Config"]
        layers = []
        for rel in entry["Layers"]:
            path = self._dir / "x" / rel
            digest = _sha256_file(path)
            self._blobs[digest] = path
            layers.append(
                {
                    "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": path.stat().st_size,
                    "digest": digest,
                }
            )
        config_digest = _sha256_file(config)
        self._blobs[config_digest] = config
        self.manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {
                    "mediaType": "application/vnd.docker.container.image.v1+json",
                    "size": config.stat().st_size,
                    "digest": config_digest,
                },
                "layers": layers,
            }
        ).encode()
        self.manifest_digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, length: int, content_type: str, digest: str | None = None) -> None:
                self.send_response(status)
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(length))
                if digest:
                    self.send_header("Docker-Content-Digest", digest)
                self.end_headers()

            def _route(self, body: bool) -> None:
                registry.requests.append(f"{self.command} {self.path}")
                prefix = f"/v2/{registry.repository}/"
                if self.path == "/v2/":
                    self._send(200, 2, "application/json")
                    if body:
                        self.wfile.write(b"{}")
                elif self.path.startswith(prefix + "manifests/"):
                    self._send(200, len(registry.manifest), MANIFEST_TYPE, registry.manifest_digest)
                    if body:
                        self.wfile.write(registry.manifest)
                elif self.path.startswith(prefix + "blobs/") and self.path[len(prefix) + 6 :] in registry._blobs:
                    digest = self.path[len(prefix) + 6 :]
                    path = registry._blobs[digest]
                    self._send(200, path.stat().st_size, "application/octet-stream", digest)
                    if body:
                        with path.open("rb") as f:
                            shutil.copyfileobj(f, self.wfile, 1 << 20)
                else:
                    message = b'{"errors":[{"code":"NAME_UNKNOWN","message":"unknown"}]}'
                    self._send(404, len(message), "application/json")
                    if body:
                        self.wfile.write(message)

            def do_GET(self) -> None:
                self._route(body=True)

            def do_HEAD(self) -> None:
                self._route(body=False)

        return Handler

    def __enter__(self) -> LocalRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        shutil.rmtree(self._dir, ignore_errors=True)
