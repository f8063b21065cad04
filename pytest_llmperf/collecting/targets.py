"""Build the server target the options chose; --llmperf-cleanup and the leftover notice
of container sessions."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_llmperf.kinds import TargetContext
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.base import ServerTarget
from pytest_llmperf.servers.spec import ServerSpec

if TYPE_CHECKING:  # imported when a local target is chosen
    from pytest_llmperf.servers.local_vllm import LocalVllmTarget

LEFTOVER_CHECK_TIMEOUT = 10.0  # seconds: the session-start notice must not hang on a far engine


def baseline_folders_before_start(options: LlmperfOptions) -> list[str] | None:
    """The baseline folders this session's tests will be judged in, or None when only a
    running server can tell (--llmperf-gpu, or a local vLLM GPU build where nvidia-smi
    answers, without --llmperf-target-name). A local target's interpreter is checked
    here (InterpreterError)."""
    if options.target_name:
        return [options.target_name]
    chosen = options.target_kind
    if chosen is None:
        return None
    local = check_target(options)
    if local is not None and local.gpu_query(os.environ) is not None:
        return None  # a GPU build where nvidia-smi answers: judged per GPU model
    return None if chosen.baseline_folder is None else [chosen.baseline_folder]


def build_target(
    options: LlmperfOptions,
    session_id: str,
    progress: Callable[[str], None],
    gpu_slots: Mapping[str, Sequence[str]] | None = None,
) -> ServerTarget:
    """The target the options chose, built by its kind's factory (kinds.py); `gpu_slots`
    (--llmperf-gpus, plan.py): each server's slot, the GPUs a GPU container is given (a
    label and provenance elsewhere). The plugin builds it through the
    pytest_llmperf_make_target hook."""
    chosen = options.target_kind
    if chosen is None:
        raise ValueError(f"no target chosen (got {options.target!r})")
    return chosen.factory(options, TargetContext(session_id, progress, gpu_slots))


def check_target(options: LlmperfOptions) -> LocalVllmTarget | None:
    """The local vLLM target of a kind that runs one (--llmperf-local, --llmperf-real-cpu),
    its interpreter checked before any server starts (InterpreterError names it and the
    fix); None for other kinds."""
    chosen = options.target_kind
    return chosen.local_vllm(options) if chosen is not None and chosen.runs_local_vllm else None


def sim_profile_lines(options: LlmperfOptions, specs: Sequence[ServerSpec]) -> list[str]:
    """For the header of a --llmperf-sim session: which simulator profile (timing model)
    each server runs with, `generic` being a stand-in for models none was fitted to."""
    from pytest_llmperf.servers.sim_target import SimTarget

    target = SimTarget(speed=options.sim_speed, extra_args=options.sim_args)
    by_profile: dict[str, list[str]] = {}
    for spec in specs:
        try:
            name = target.profile_name(spec)
        except ValueError:  # its server's start says why, with the fix
            continue
        names = by_profile.setdefault(name, [])
        if spec.name not in names:
            names.append(spec.name)
    return [
        f"simulator profile {profile}"
        + (" (no profile fitted to these models: a small generic engine)" if profile == "generic" else "")
        + ": "
        + ", ".join(names)
        for profile, names in by_profile.items()
    ]


def cleanup_leftover_containers(max_age: float) -> list[str]:
    """--llmperf-cleanup: remove the containers whose owning session is gone (same host:
    that process no longer runs; another host or no owner recorded: older than
    `max_age`). The lines say what was removed and what was kept, and why."""
    from pytest_llmperf.servers.docker import connect
    from pytest_llmperf.servers.leftovers import cleanup_leftovers, cleanup_lines

    try:
        client = connect(os.environ)
    except Exception as exc:  # noqa: BLE001 - any cause means no engine to clean
        raise RuntimeError(
            f"no Docker engine answers ({type(exc).__name__}: {exc}); start dockerd or set DOCKER_HOST"
        ) from None
    return cleanup_lines(*cleanup_leftovers(client, max_age))


def leftover_report(max_age: float) -> list[str]:
    """A container session's first look at the engine: the leftovers of sessions that are
    gone, with the command that removes them. Nothing when there are none, or when no
    engine answers (the first server start says that, with the fix)."""
    from pytest_llmperf.servers.docker import connect
    from pytest_llmperf.servers.leftovers import find_leftovers, leftover_lines

    try:
        client = connect(os.environ, timeout=LEFTOVER_CHECK_TIMEOUT)
        return leftover_lines(find_leftovers(client, max_age))
    except Exception:  # noqa: BLE001 - a notice; it must not stop a session
        return []
