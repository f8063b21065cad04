"""The simulated vLLM server as a target (--llmperf-sim), each in its own process (no GIL
shared with the client), `speed` times faster than real time (`clock_speed` scales back)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.provenance import server_provenance
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec

if TYPE_CHECKING:  # the simulator is imported when a server starts
    from pytest_llmperf.sim.server import SimProcess


class SimTarget:
    name = "sim"
    starts_servers = True

    def __init__(
        self,
        speed: float = 10.0,
        extra_args: tuple[str, ...] = (),
        ready_timeout: float = 1800.0,
        gpu_slots: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.speed = speed
        # --llmperf-gpus on the simulator: server name -> the slot it would hold (provenance only).
        self.gpu_slots = {name: list(ids) for name, ids in (gpu_slots or {}).items()}
        self.extra_args = tuple(extra_args)
        self.ready_timeout = ready_timeout  # --llmperf-ready-timeout, real seconds

    def argv(self, spec: ServerSpec) -> list[str]:
        return [
            *spec.vllm_args(host="127.0.0.1", port=0),
            "--sim-speed",
            repr(self.speed),
            *spec.sim_args,
            *self.extra_args,
        ]

    def profile_name(self, spec: ServerSpec) -> str:
        """The simulator profile `spec` runs with (its model's, else `generic`, or --sim-profile's)."""
        from pytest_llmperf.sim import SimConfig

        profile = SimConfig.from_vllm_argv(self.argv(spec)).profile
        assert profile is not None  # resolved from the model name when not given
        return profile.name

    @contextmanager
    def start(self, spec: ServerSpec) -> Iterator[Endpoint]:
        from pytest_llmperf.sim import SimConfig
        from pytest_llmperf.sim.server import simulated_process

        config = SimConfig.from_vllm_argv(self.argv(spec))
        with simulated_process(config) as sim:
            exited = functools.partial(_exit_status, sim)
            wait_until_ready(sim.url, spec.model_id, self.ready_timeout, is_alive=exited, poll_interval=0.05)
            provenance = server_provenance(sim.url)
            provenance.update(
                clock_speed=self.speed,
                simulator=True,
                sim_profile=config.profile.name if config.profile else None,
                sim_args=list(spec.sim_args + self.extra_args),
            )
            if spec.name in self.gpu_slots:
                provenance["gpu_ids"] = self.gpu_slots[spec.name]
            yield Endpoint(
                sim.url,
                spec.model_id,
                self.name,
                provenance,
                exit_status=exited,
                log_tail=lambda lines: "\n".join(sim.output_tail(lines)),
            )


def _exit_status(sim: SimProcess) -> str | None:
    code = sim.returncode
    return None if code is None else f"the simulator process exited with code {code}"
