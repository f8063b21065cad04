"""`python -m pytest_llmperf.sim MODEL --host H --port P [vLLM flags] [--sim-* flags]`.

Prints one line with the URL once it listens (port 0: a free port), exits 0 on
SIGTERM/SIGINT, 1 when a crash fault is set to end the process (--sim-crash-exit).
"""

from __future__ import annotations

import logging
import os
import sys

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.server import PARENT_PID_ENV, base_url, make_server


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    try:
        config = SimConfig.from_vllm_argv(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server, sock = make_server(config)
    url = base_url(sock)
    k = config.num_speculative_tokens
    print(
        f"pytest-llmperf simulated vLLM serving {config.model_id!r} (profile {config.resolved_profile.name}, "
        f"{'k=' + str(k) + ' speculative' if k else 'no speculation'}, speed x{config.speed:g}) "
        f"on {url}",
        flush=True,
    )
    if os.environ.get(PARENT_PID_ENV, "").isdigit():  # started by simulated_server(mode="process")
        server.parent_pid = int(os.environ[PARENT_PID_ENV])
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return server.exit_code


if __name__ == "__main__":
    sys.exit(main())
