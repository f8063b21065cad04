"""Build the server target the options chose."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.base import ServerTarget

# The baseline folder each kind of target is judged in, known before any server starts:
# its target's name (session.default_baseline_folder); None for GPUs, judged per GPU model,
# which a server reports once it runs.
BASELINE_FOLDERS: dict[str, str | None] = {
    "sim": "sim",
    "docker": "docker",
    "external": "external",
    "real-cpu": "local-vllm",
    "gpu": None,
}


def baseline_folders_before_start(options: LlmperfOptions) -> list[str] | None:
    """The baseline folders this session's tests will be judged in, or None when only a
    running server can tell (--llmperf-gpu without --llmperf-target-name)."""
    if options.target_name:
        return [options.target_name]
    folder = BASELINE_FOLDERS.get(options.target or "")
    return None if folder is None else [folder]


def build_target(options: LlmperfOptions, session_id: str, progress: Callable[[str], None]) -> ServerTarget:
    kind = options.target
    if kind == "sim":
        from pytest_llmperf.servers.sim_target import SimTarget

        return SimTarget(speed=options.sim_speed, extra_args=options.sim_args, ready_timeout=options.ready_timeout)
    if kind == "external":
        from pytest_llmperf.servers.external import ExternalTarget

        if options.base_url is None:
            raise ValueError("the external target needs a base URL (--llmperf-base-url)")
        return ExternalTarget(options.base_url, ready_timeout=options.ready_timeout)
    if kind in ("gpu", "docker"):
        from pytest_llmperf.servers.docker import DockerTarget

        return DockerTarget(
            gpu=kind == "gpu",
            image_override=options.image,
            hf_cache=Path(options.hf_cache).expanduser(),
            ready_timeout=options.ready_timeout,
            session_id=session_id,
            progress=progress,
        )
    if kind == "real-cpu":
        from pytest_llmperf.servers.local_vllm import target_from_prepared_env

        return target_from_prepared_env(ready_timeout=min(options.ready_timeout, 600.0))
    raise ValueError(f"no target chosen (got {kind!r})")


def cleanup_leftover_containers() -> str:
    """--llmperf-cleanup: remove containers that killed sessions left (found by label)."""
    import docker
    from pytest_llmperf.servers.docker import cleanup_leftovers

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any cause means no engine to clean
        raise RuntimeError(
            f"no Docker engine answers ({type(exc).__name__}: {exc}); start dockerd or set DOCKER_HOST"
        ) from None
    removed = cleanup_leftovers(client)
    if not removed:
        return "--llmperf-cleanup: no leftover containers"
    return f"--llmperf-cleanup removed {len(removed)} leftover container(s): {', '.join(removed)}"
