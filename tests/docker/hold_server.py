"""Start a sim container with DockerTarget, print READY and wait to be signalled.

Used by the lifecycle tests as the process that is sent SIGTERM, SIGINT or SIGKILL.
Usage: python hold_server.py IMAGE SESSION_ID
"""

from __future__ import annotations

import sys
import time

from pytest_llmperf.servers.docker import DockerTarget
from pytest_llmperf.servers.spec import ServerSpec


def main() -> None:
    image, session = sys.argv[1], sys.argv[2]
    spec = ServerSpec(name="held", model="sim/held-model", args=("--sim-speed", "50"))
    target = DockerTarget(image_override=image, hf_cache=None, ready_timeout=60, session_id=session, stop_timeout=5)
    with target.start(spec) as endpoint:
        print(f"READY {endpoint.base_url}", flush=True)
        time.sleep(120)
    print("EXITED NORMALLY", flush=True)


if __name__ == "__main__":
    main()
