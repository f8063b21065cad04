"""A stand-in for `python -m vllm.entrypoints.openai.api_server`, for fast lifecycle
tests of LocalVllmTarget without the real engine.

It takes vLLM's argv shape (--model, --host, --port, --served-model-name), forks a
child like vLLM's engine core does (so group-wide stopping is tested), and behaves
as FAKE_VLLM_MODE says:
  ok           serve /health, /v1/models, /version
  die          print an argparse-like error and exit 2 at once
  ignore_term  serve, but ignore SIGTERM (the target must escalate to SIGKILL)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name")
    args, unknown = parser.parse_known_args()
    if mode == "die" or unknown:
        print(f"api_server.py: error: unrecognized arguments: {' '.join(unknown) or '--bogus'}", flush=True)
        sys.exit(2)
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The "engine core": a child in the same process group that outlives nothing.
    child_code = (
        "import signal,time\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if mode == "ignore_term" else "")
        + "time.sleep(3600)"
    )
    subprocess.Popen([sys.executable, "-c", child_code])
    served = args.served_model_name or args.model
    # Like vLLM's ZMQ sockets between its processes: a file in VLLM_RPC_BASE_PATH, left behind.
    rpc = os.environ.get("VLLM_RPC_BASE_PATH")
    if rpc:
        open(os.path.join(rpc, f"fake-ipc-{os.getpid()}"), "w").close()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            bodies = {
                "/health": None,
                "/version": {"version": "0.0.0-fake"},
                "/v1/models": {"object": "list", "data": [{"id": served, "object": "model"}]},
            }
            if self.path not in bodies:
                self.send_response(404)
                self.end_headers()
                return
            body = b"" if bodies[self.path] is None else json.dumps(bodies[self.path]).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    print(f"INFO: fake vLLM serving {served} on {args.host}:{args.port}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
