"""Start a sim container with DockerTarget, print READY and wait to be signalled.

Used by the lifecycle tests as the process that is sent SIGTERM, SIGINT or SIGKILL.
Usage: python hold_server.py IMAGE SESSION_ID [loading]
With `loading` the server never gets ready: LOADING is printed from the first progress
line, so the signal arrives while DockerTarget waits for the model.
"""

from __future__ import annotations

import signal
import sys
import time

from pytest_llmperf.servers.docker import DockerTarget
from pytest_llmperf.servers.spec import ServerSpec


def main() -> None:
    # A job started in the background by a non-interactive shell inherits SIGINT ignored,
    # and Python then keeps it so: restore Ctrl-C's KeyboardInterrupt, which the tests send.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    image, session = sys.argv[1], sys.argv[2]
    loading = sys.argv[3:] == ["loading"]
    args = ("--sim-slow-start-seconds", "600") if loading else ("--sim-speed", "50")
    spec = ServerSpec(name="held", model="sim/held-model", args=args)

    def progress(line: str) -> None:
        if loading and "loading in" in line:
            print("LOADING", flush=True)

    target = DockerTarget(
        image_override=image,
        hf_cache=None,
        ready_timeout=300,
        session_id=session,
        stop_timeout=5,
        progress=progress,
        progress_interval=0.5,
    )
    with target.start(spec) as endpoint:
        print(f"READY {endpoint.base_url}", flush=True)
        time.sleep(120)
    print("EXITED NORMALLY", flush=True)


if __name__ == "__main__":
    main()
