"""Target kinds (sim, gpu, docker, local, real-cpu, external) and their registry.

Callers ask a kind's properties instead of comparing its name. A conftest.py adds a kind
with the `pytest_llmperf_target_kinds` hook and can build targets with
`pytest_llmperf_make_target` (hooks.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pytest_llmperf.doctor_checks.sets import (
    CONTAINERS,
    EXTERNAL_SERVER,
    GPU_CONTAINERS,
    LOCAL_VLLM,
    NO_CHECKS,
    SIMULATOR,
    DoctorChecks,
)
from pytest_llmperf.servers.base import ServerStartError, ServerTarget

if TYPE_CHECKING:
    from pytest_llmperf.servers.local_vllm import LocalVllmTarget

# The built-in kinds' check sets by the names a TargetKind may give for them.
CHECKS_BY_NAME = {
    "sim": SIMULATOR,
    "gpu": GPU_CONTAINERS,
    "docker": CONTAINERS,
    "external": EXTERNAL_SERVER,
    "local": LOCAL_VLLM,
    "none": NO_CHECKS,
}

# options.LlmperfOptions: options.py imports this module, so the type is not named here.
LlmperfOptions = Any

TARGET_OPTION = "--llmperf-target"  # chooses a kind by name: the way to a kind a conftest.py adds

# How a kind runs under pytest-xdist (-n): "free" (workers may run its servers side by
# side), "gpu-slots" (only with --llmperf-gpus: each worker owns a slot), "never".
XdistRule = Literal["free", "gpu-slots", "never"]


@dataclass(frozen=True)
class TargetContext:
    """What building a target needs beyond the options: session id, a progress line, and
    under --llmperf-gpus each server's GPU slot (plan.py)."""

    session_id: str
    progress: Callable[[str], None]
    gpu_slots: Mapping[str, Sequence[str]] | None = None


Factory = Callable[[LlmperfOptions, TargetContext], ServerTarget]


@dataclass(frozen=True)
class TargetKind:
    """A kind of target: how it is chosen, judged, checked and built."""

    name: str  # LlmperfOptions.target
    factory: Factory  # builds its ServerTarget; pytest_llmperf_make_target may build it instead
    description: str = ""  # a few words for the doctor and the docs
    flag: str = ""  # the option that chooses it; "" for `--llmperf-target NAME`
    dest: str | None = None  # that option's dest; None: chosen by --llmperf-target
    # Its baselines folder ("": its name); None: the GPU model a running server reports.
    baseline_folder: str | None = ""
    starts_servers: bool = True  # False: attaches to a server someone else runs (a fresh start is not ours)
    accepts_sim_args: bool = False  # its servers are the simulator: --llmperf-sim-args and its profile lines apply
    uses_gpu_slots: bool = False  # --llmperf-gpus spreads its servers over GPU slots
    containers: bool = False  # Docker containers: --llmperf-image, leftover cleanup apply
    # vLLM as a local process: its interpreter (None: scripts/real_vllm_cpu.sh's build).
    local_python: Callable[[LlmperfOptions], str | None] | None = None
    xdist: XdistRule = "free"
    # What `llmperf doctor` and --llmperf-doctor check for it (doctor_checks/); a conftest's
    # kind may also name a built-in kind's set (sim, gpu, docker, external, local, none).
    doctor: DoctorChecks = NO_CHECKS
    no_sim_args: str = ""  # why --llmperf-sim-args does not apply, with the fix
    # Checks (and completes) its settings as options resolve; ValueError names the fix.
    check: Callable[[LlmperfOptions], LlmperfOptions] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.doctor, str):
            if self.doctor not in CHECKS_BY_NAME:
                known = ", ".join(CHECKS_BY_NAME)
                raise ValueError(f"TargetKind {self.name!r}: doctor={self.doctor!r} is no check set; one of {known}")
            object.__setattr__(self, "doctor", CHECKS_BY_NAME[self.doctor])
        if not self.flag:
            object.__setattr__(self, "flag", f"{TARGET_OPTION} {self.name}")
        if self.baseline_folder == "":
            object.__setattr__(self, "baseline_folder", self.name)
        if not self.no_sim_args and not self.accepts_sim_args:
            object.__setattr__(self, "no_sim_args", f"{self.flag} takes no --sim-* flags; drop it")

    @property
    def runs_local_vllm(self) -> bool:
        return self.local_python is not None

    def where(self, options: LlmperfOptions) -> str | None:
        """The value of the option that chose it when it takes one (the base URL, the
        interpreter): shown beside the kind's name."""
        value = getattr(options, self.dest.removeprefix("llmperf_"), None) if self.dest else None
        return value if isinstance(value, str) else None

    def local_vllm(self, options: LlmperfOptions) -> LocalVllmTarget:
        """Its local vLLM target, the interpreter checked (InterpreterError names it and the fix)."""
        from pytest_llmperf.servers.local_vllm import local_target

        if self.local_python is None:
            raise ValueError(f"target kind {self.name!r} runs no local vLLM")
        where = f"ini option {self.dest!r}" if self.dest and options.sources.get(self.dest) == "ini" else self.flag
        return local_target(self.local_python(options), where, ready_timeout=options.ready_timeout)


def _sim(options: LlmperfOptions, context: TargetContext) -> ServerTarget:
    from pytest_llmperf.servers.sim_target import SimTarget

    # Paired A/B: each server's OLD and NEW flags travel in its spec (paired.py), not here.
    extra = () if options.paired else options.sim_args
    return SimTarget(
        speed=options.sim_speed, extra_args=extra, ready_timeout=options.ready_timeout, gpu_slots=context.gpu_slots
    )


def _check_sim(options: LlmperfOptions) -> LlmperfOptions:
    from pytest_llmperf.sim import SimConfig

    for flag, args in (
        ("--llmperf-sim-args", options.sim_args),
        ("--llmperf-against-sim-args", options.against_sim_args),
    ):
        try:
            if args:
                SimConfig.from_vllm_argv(["check/model", *args])
        except ValueError as exc:
            raise ValueError(f"{flag}: {exc}") from None
    return options


def _check_engine(options: LlmperfOptions) -> LlmperfOptions:
    """A remote Docker engine (DOCKER_HOST) with a port published on loopback only."""
    from pytest_llmperf.servers.docker import endpoint_host

    if os.environ.get("DOCKER_HOST"):
        try:
            endpoint_host(os.environ["DOCKER_HOST"], options.publish_host)
        except ValueError as exc:
            raise ValueError(f"pytest-llmperf: {exc}") from None
    return options


def _external(options: LlmperfOptions, context: TargetContext) -> ServerTarget:
    from pytest_llmperf.servers.external import ExternalTarget

    if options.base_url is None:
        raise ValueError("the external target needs a base URL (--llmperf-base-url)")
    return ExternalTarget(options.base_url, ready_timeout=options.ready_timeout)


def _containers(gpu: bool) -> Factory:
    def build(options: LlmperfOptions, context: TargetContext) -> ServerTarget:
        from pytest_llmperf.servers.docker import DockerTarget

        return DockerTarget(
            gpu=gpu,
            image_override=None if options.paired else options.image,  # paired: per spec (paired.py)
            hf_cache=Path(options.hf_cache).expanduser(),
            ready_timeout=options.ready_timeout,
            session_id=context.session_id,
            progress=context.progress,
            cleanup_age=options.cleanup_age,
            gpu_slots=context.gpu_slots,
            publish_host=options.publish_host,
        )

    return build


def _local(options: LlmperfOptions, context: TargetContext) -> ServerTarget:
    from pytest_llmperf.servers.local_vllm import InterpreterError

    chosen: TargetKind | None = options.target_kind
    if chosen is None:
        raise ValueError("no target chosen")
    try:
        return chosen.local_vllm(options)
    except InterpreterError as exc:  # checked at session start: changed since
        raise ServerStartError(f"cannot start a local vLLM: {exc}") from None


BUILTIN: tuple[TargetKind, ...] = (
    TargetKind(
        "sim",
        _sim,
        "the simulated server",
        "--llmperf-sim",
        "llmperf_sim",
        baseline_folder="sim",
        accepts_sim_args=True,
        uses_gpu_slots=True,  # the slot as a label: a rehearsal of the plan on a box without GPUs
        doctor=SIMULATOR,
        check=_check_sim,
    ),
    TargetKind(
        "gpu",
        _containers(gpu=True),
        "vLLM containers on GPUs",
        "--llmperf-gpu",
        "llmperf_gpu",
        baseline_folder=None,  # the GPU model
        uses_gpu_slots=True,
        containers=True,
        xdist="gpu-slots",
        doctor=GPU_CONTAINERS,
        no_sim_args="--llmperf-gpu runs vLLM images, which take no --sim-* flags; drop it",
        check=_check_engine,
    ),
    TargetKind(
        "docker",
        _containers(gpu=False),
        "containers without GPUs",
        "--llmperf-docker",
        "llmperf_docker",
        baseline_folder="docker",
        uses_gpu_slots=True,  # the slot as a label
        containers=True,
        xdist="gpu-slots",
        doctor=CONTAINERS,
        no_sim_args="--llmperf-docker runs the image's own server, which takes no --sim-* flags; drop it, and "
        "give a simulator image its flags in the ServerSpec's args",
        check=_check_engine,
    ),
    TargetKind(
        "external",
        _external,
        "an external server",
        "--llmperf-base-url",
        "llmperf_base_url",
        baseline_folder="external",
        starts_servers=False,
        doctor=EXTERNAL_SERVER,
        no_sim_args="--llmperf-base-url attaches to a server someone else runs; drop it",
    ),
    TargetKind(
        "real-cpu",
        _local,
        "the prepared vLLM CPU build as a local process",
        "--llmperf-real-cpu",
        "llmperf_real_cpu",
        baseline_folder="local-vllm",
        local_python=lambda options: None,  # the prepared CPU build
        doctor=LOCAL_VLLM,
        no_sim_args="--llmperf-real-cpu runs a real vLLM, which takes no --sim-* flags; drop it",
    ),
    TargetKind(
        "local",
        _local,
        "vLLM as a local process",
        "--llmperf-local",
        "llmperf_local",
        baseline_folder="local-vllm",  # or the GPU model's, once a server runs on one
        local_python=lambda options: options.local,
        xdist="never",  # several vLLM processes on the GPUs CUDA_VISIBLE_DEVICES names
        doctor=LOCAL_VLLM,
        no_sim_args="--llmperf-local runs a real vLLM, which takes no --sim-* flags; drop it",
    ),
)
KINDS: dict[str, TargetKind] = {k.name: k for k in BUILTIN}


def registry(added: Iterable[TargetKind] = ()) -> dict[str, TargetKind]:
    """The built-in kinds and those a hook added; an added kind replaces a built-in one of its name."""
    return {**KINDS, **{k.name: k for k in added}}


def kind(name: str, added: Iterable[TargetKind] = ()) -> TargetKind:
    """The kind called `name`; ValueError listing the known kinds for any other name."""
    known = registry(added)
    if name not in known:
        raise ValueError(
            f"unknown target kind {name!r}: known kinds are {', '.join(known)} "
            "(a conftest.py adds one with the pytest_llmperf_target_kinds hook)"
        )
    return known[name]
