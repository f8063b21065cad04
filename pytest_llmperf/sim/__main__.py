"""`python -m pytest_llmperf.sim MODEL --host H --port P [vLLM flags] [--sim-* flags]`:
the simulated vLLM server as a process. `--help` prints USAGE, DESCRIPTION and one line
per --sim-* flag (sim/config.py's table, so a flag is never accepted unexplained).
"""

from __future__ import annotations

import logging
import os
import resource
import sys

from pytest_llmperf.sim.config import SimConfig, sim_flags_help
from pytest_llmperf.sim.server import PARENT_PID_ENV, base_url, make_server

USAGE = "usage: python -m pytest_llmperf.sim MODEL [--host HOST] [--port PORT] [vLLM flags] [--sim-* flags]"
DESCRIPTION = """\
A simulated vLLM server: vLLM's OpenAI-compatible endpoints and metric names over a timing
model of its engine, with no GPU and no model weights.

It prints one line with its URL once it listens (--port 0, the default: a free port) and
exits 0 on SIGTERM or SIGINT, 1 when a crash fault ends the process (--sim-crash-exit).
Of vLLM's flags it reads --model, --host, --port, --max-num-seqs, --max-model-len,
--speculative-config, --served-model-name, --seed, --reasoning-parser and
--disable-log-stats; any other is ignored with a log line.

Clock: --sim-speed is 1 unless given, real time, as for a server you start and measure
yourself. pytest --llmperf-sim starts its servers at --llmperf-sim-speed (default 10), so a
suite runs ten times faster, and scales every figure back to real time."""


def help_text() -> str:
    return "\n".join([USAGE, "", DESCRIPTION, "", "simulator flags:", *sim_flags_help()])


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(help_text())
        return 0 if args else 2
    try:
        config = SimConfig.from_vllm_argv(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _raise_open_files_limit()
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


def _raise_open_files_limit(target: int = 65535) -> None:
    """As vLLM's server does at start (vllm.utils.set_ulimit): the soft RLIMIT_NOFILE up to
    `target`, within the hard limit, so that high concurrency does not run out of sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = target if hard == resource.RLIM_INFINITY else min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as exc:
            logging.getLogger("pytest_llmperf.sim").warning(
                "sim: open files limited to %d and not raised (%s): consider `ulimit -n`", soft, exc
            )


if __name__ == "__main__":
    sys.exit(main())
