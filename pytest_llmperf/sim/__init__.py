"""A simulated vLLM server: vLLM's API and metrics with a continuous-batching timing model
(docs/sim.md)."""

from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.profiles import GENERIC, PROFILES, Profile, resolve_profile
from pytest_llmperf.sim.server import simulated_server

__all__ = ["GENERIC", "PROFILES", "Profile", "SimConfig", "resolve_profile", "simulated_server"]
