"""A simulated vLLM server: vLLM's API and metrics with a continuous-batching timing model.

    from pytest_llmperf.sim import SimConfig, simulated_server
    with simulated_server(SimConfig(model="Qwen/Qwen3.6-27B-FP8", speed=20)) as url:
        ...

See docs/sim.md.
"""

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.profiles import GENERIC, PROFILES, Profile, resolve_profile
from pytest_llmperf.sim.server import simulated_server

__all__ = ["GENERIC", "PROFILES", "Profile", "SimConfig", "resolve_profile", "simulated_server"]
