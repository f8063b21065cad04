"""Each target kind's doctor checks (a `DoctorChecks`, which its `TargetKind` carries) and
what they are run with (`DoctorConfig`): the simulator's one line, an external server's,
a local vLLM's, and the containers' with or without GPUs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_llmperf.doctor_checks.cache import check_hf_cache
from pytest_llmperf.doctor_checks.check import FAIL, OK, SKIP, Check, redacted
from pytest_llmperf.doctor_checks.docker import (
    check_engine,
    check_gpus_in_image,
    check_image,
    check_publish,
    gpu_runtime_check,
    runtime_by_container,
)
from pytest_llmperf.doctor_checks.external import check_external
from pytest_llmperf.doctor_checks.local import check_host_gpus, check_local_vllm
from pytest_llmperf.doctor_checks.tokens import check_tokens
from pytest_llmperf.servers.spec import ServerSpec

# The image a ServerSpec runs when it names none: the plugin's default vLLM image.
DEFAULT_IMAGE = str(ServerSpec.__dataclass_fields__["image"].default)
DEFAULT_HF_CACHE = "~/.cache/huggingface"


@dataclass(frozen=True)
class DoctorChecks:
    """A target kind's doctor checks, and what `llmperf doctor`'s header calls them and names."""

    words: str
    run: Callable[[DoctorConfig], list[Check]]
    subject: Callable[[DoctorConfig], str]


def _sim_checks(config: DoctorConfig) -> list[Check]:
    return [Check("simulated server", OK, "runs inside pytest: nothing outside this process to check")]


def _external_checks(config: DoctorConfig) -> list[Check]:
    return [check_external(config.base_url or "", config.timeout)]


def _no_checks(config: DoctorConfig) -> list[Check]:
    return [Check("target", SKIP, "this target kind declares no doctor checks")]


def _local_checks(config: DoctorConfig) -> list[Check]:
    env = config.environ
    checks = [*check_local_vllm(config.python, env, timeout=config.timeout)]
    if config.local_gpu:
        checks.append(check_host_gpus(env, timeout=config.timeout))
    if config.hf_cache is not None:
        checks += check_hf_cache(config.hf_cache, config.models, env, local=True)
    return checks + check_tokens(config.tokens, env)


def _container_checks(config: DoctorConfig, *, gpu: bool) -> list[Check]:
    env = config.environ
    checks: list[Check] = []
    engine, client = check_engine(env, config.timeout)
    checks.append(engine)
    if client is None:
        later = ["GPU support in Docker"] if gpu and config.gpu_request else []
        later += [f"image {ref}" for ref in config.images]
        checks += [Check(name, SKIP, "not tried: no Docker Engine") for name in later]
    else:
        runtime_at: int | None = None
        if gpu and config.gpu_request:
            try:
                runtime = gpu_runtime_check(client.info())
            except Exception as exc:  # noqa: BLE001 - the engine went away between calls
                runtime = Check("GPU support in Docker", FAIL, f"`docker info` failed: {exc}", "check the engine")
            runtime_at = len(checks)
            checks.append(runtime)
        for ref in config.images:
            image_check, image = check_image(client, ref, pull=config.pull)
            checks.append(image_check)
            if not gpu:
                continue
            if image is None:
                checks.append(Check(f"GPUs in {ref}", SKIP, "not tried: the image is not on the engine"))
                continue
            gpus = check_gpus_in_image(client, ref, image, gpu_request=config.gpu_request, timeout=config.timeout)
            if runtime_at is not None and checks[runtime_at].failed:
                checks[runtime_at], gpus = runtime_by_container(checks[runtime_at], gpus)
            checks.append(gpus)
    from pytest_llmperf.servers.docker import engine_host

    try:
        remote = engine_host(env.get("DOCKER_HOST")) is not None
    except ValueError:
        remote = False
    if config.hf_cache is not None:
        checks += check_hf_cache(config.hf_cache, config.models if gpu else (), env, remote_engine=remote)
    checks += check_tokens(config.tokens, env)
    checks.append(check_publish(config.publish_host, env))
    return checks


def _images(config: DoctorConfig) -> str:
    return ", ".join(config.images)


GPU_CONTAINERS = DoctorChecks("vLLM containers on GPUs", lambda c: _container_checks(c, gpu=True), _images)
CONTAINERS = DoctorChecks("containers without GPUs", lambda c: _container_checks(c, gpu=False), _images)
LOCAL_VLLM = DoctorChecks("vLLM as a local process", _local_checks, lambda c: c.python or "python3")
EXTERNAL_SERVER = DoctorChecks("an external server", _external_checks, lambda c: c.base_url or "")
SIMULATOR = DoctorChecks("the simulated server", _sim_checks, _images)
NO_CHECKS = DoctorChecks("a target kind without doctor checks", _no_checks, lambda c: "")


@dataclass(frozen=True)
class DoctorConfig:
    """What to check: `checks`, a target kind's (TargetKind.doctor), on these images,
    models, cache, tokens, address, interpreter or server."""

    checks: DoctorChecks = GPU_CONTAINERS
    images: tuple[str, ...] = (DEFAULT_IMAGE,)
    models: tuple[str, ...] = ()
    hf_cache: str | None = DEFAULT_HF_CACHE  # None: no cache mounted / used
    tokens: tuple[str, ...] = ("HF_TOKEN",)  # variables the servers pass through from here
    publish_host: str = "127.0.0.1"
    python: str | None = None  # local: the interpreter (default: python3 on PATH)
    local_gpu: bool = True  # local: check the host's GPUs too (off for a CPU build)
    base_url: str | None = None
    pull: bool = False  # pull a missing image instead of only asking the registry
    gpu_request: bool = True  # False: no device request or runtime check (tests with a fake nvidia-smi)
    timeout: float = 60.0  # seconds for each slow step (engine calls, nvidia-smi, import vllm)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def run_doctor(config: DoctorConfig) -> list[Check]:
    """Every check of `config.checks`, in order; never raises for a failed check."""
    secrets = [config.environ[n] for n in config.tokens if config.environ.get(n)]
    return redacted(config.checks.run(config), secrets)
