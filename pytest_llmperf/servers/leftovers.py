"""Which containers of this plugin are leftovers: the labels a container records (session,
spec, GPUs, owner, creation time) and the rule --llmperf-cleanup judges them by."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.owners import Owner, current_owner, is_running, process_name
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.servers.teardown import removal_in_progress

LABEL_PLUGIN = "io.pytest-llmperf.plugin"
LABEL_SESSION = "io.pytest-llmperf.session"
LABEL_SPEC = "io.pytest-llmperf.spec"
LABEL_MODEL = "io.pytest-llmperf.model"
LABEL_GPU = "io.pytest-llmperf.gpu"
LABEL_GPUS = "io.pytest-llmperf.gpus"  # the slot's GPU ids ("0,1"), or "all"
LABEL_OWNER_HOST = "io.pytest-llmperf.owner.host"
LABEL_OWNER_PID = "io.pytest-llmperf.owner.pid"
LABEL_OWNER_START = "io.pytest-llmperf.owner.start"
LABEL_OWNER_BOOT = "io.pytest-llmperf.owner.boot"
LABEL_OWNER_PIDNS = "io.pytest-llmperf.owner.pidns"
LABEL_CREATED = "io.pytest-llmperf.created"
PLUGIN_NAME = "pytest-llmperf"
PLUGIN_FILTER = f"{LABEL_PLUGIN}={PLUGIN_NAME}"
DEFAULT_CLEANUP_AGE = 24 * 3600.0  # a container whose owner cannot be checked is a leftover after this
CLEANUP_HINT = "remove with pytest --llmperf-cleanup"


def owner_from_labels(labels: Mapping[str, str]) -> Owner | None:
    """The owner a container recorded; None without owner labels naming a process."""
    host, pid = labels.get(LABEL_OWNER_HOST), labels.get(LABEL_OWNER_PID, "")
    if not host or not pid.isdigit() or int(pid) <= 0:
        return None
    return Owner(
        host=host,
        pid=int(pid),
        start=labels.get(LABEL_OWNER_START, ""),
        boot=labels.get(LABEL_OWNER_BOOT, ""),
        pidns=labels.get(LABEL_OWNER_PIDNS, ""),
    )


def _parse_utc(text: str) -> float | None:
    """ISO 8601 as the label holds it, or as Docker's `Created` does (nanoseconds, Z)."""
    text = text.strip()
    if not text:
        return None
    if "." in text:  # Python's fromisoformat takes at most microseconds: the age needs none
        head, _, tail = text.partition(".")
        zone = next((tail[i:] for i, ch in enumerate(tail) if not ch.isdigit()), "")
        text = head + zone
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def container_labels(
    session_id: str,
    spec: ServerSpec,
    gpu: bool,
    *,
    owner: Owner | None = None,
    created: float | None = None,
    gpu_ids: Sequence[str] | None = None,
) -> dict[str, str]:
    """The plugin's labels, with the owner (default: this process) and creation time
    (default: now) that --llmperf-cleanup judges by."""
    slot = {LABEL_GPUS: ",".join(gpu_ids)} if gpu_ids else ({LABEL_GPUS: "all"} if gpu else {})
    owner = owner or current_owner()
    created = time.time() if created is None else created
    return {
        **slot,
        LABEL_PLUGIN: PLUGIN_NAME,
        LABEL_SESSION: session_id,
        LABEL_SPEC: spec.name,
        LABEL_MODEL: spec.model,
        LABEL_GPU: "1" if gpu else "0",
        LABEL_OWNER_HOST: owner.host,
        LABEL_OWNER_PID: str(owner.pid),
        LABEL_OWNER_START: owner.start,
        LABEL_OWNER_BOOT: owner.boot,
        LABEL_OWNER_PIDNS: owner.pidns,
        LABEL_CREATED: datetime.fromtimestamp(created, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def created_at(container: Any) -> float | None:
    """When the container was made: its label, else the engine's record, else None."""
    stamp = _parse_utc((container.labels or {}).get(LABEL_CREATED, ""))
    if stamp is not None:
        return stamp
    created = (getattr(container, "attrs", None) or {}).get("Created")
    if isinstance(created, (int, float)):  # the list endpoint's form: seconds
        return float(created)
    return _parse_utc(created) if isinstance(created, str) else None


def format_duration(seconds: float) -> str:
    """45s, 12m, 30h, 3d: how ages and the cleanup age are shown."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def gpus_overlap(ours: Sequence[str] | None, label: str | None) -> bool:
    """Whether a GPU container whose LABEL_GPUS is `label` (none or "all": any GPU) may use
    one of `ours` (None: every GPU)."""
    if ours is None or not label or label == "all":
        return True
    return bool(set(ours) & set(label.split(",")))


def describe_container(container: Any) -> str:
    """Name and what it was: `llmperf-x-... (spec x, model m, gpu 1, exited, session s)`."""
    labels = container.labels or {}
    return (
        f"{container.name} (spec {labels.get(LABEL_SPEC, '?')}, model {labels.get(LABEL_MODEL, '?')}, "
        f"gpu {labels.get(LABEL_GPU, '?')}, {container.status}, session {labels.get(LABEL_SESSION, '?')})"
    )


@dataclass(frozen=True)
class Judgement:
    """One container of this plugin: a leftover (its owner is gone) or not, and why."""

    container: Any
    leftover: bool
    reason: str

    @property
    def name(self) -> str:
        return str(self.container.name)

    def line(self) -> str:
        return f"{describe_container(self.container)}: {self.reason}"


def judge(
    container: Any,
    max_age: float = DEFAULT_CLEANUP_AGE,
    *,
    me: Owner | None = None,
    now: float | None = None,
    alive: Callable[[Owner], bool] = is_running,
) -> Judgement:
    """The rule of --llmperf-cleanup: a leftover when its owner on this machine is gone
    (never while it runs); with the owner elsewhere or unknown, once older than `max_age`."""
    me = me or current_owner()
    now = time.time() if now is None else now
    owner = owner_from_labels(container.labels or {})
    if owner is not None and owner.same_machine(me):
        if (owner.pid, owner.start) == (me.pid, me.start):
            return Judgement(container, False, f"owned by this process (pid {me.pid})")
        if alive(owner):
            name = process_name(owner.pid)
            shown = f" ({name})" if name else ""
            return Judgement(container, False, f"owned by live pytest pid {owner.pid}{shown} on this host")
        return Judgement(container, True, f"its owner, pid {owner.pid} on this host, is gone")
    if owner is None:
        whose = "no owner labels (made by an older version of the plugin)"
    elif owner.host != me.host:
        whose = f"owned by pid {owner.pid} on host {owner.host}, which cannot be checked from here"
    else:  # same name, another boot or pid namespace: that pid is not this machine's
        whose = f"owned by pid {owner.pid} on {owner.host} in another boot or pid namespace, which cannot be checked"
    created = created_at(container)
    if created is None:
        return Judgement(container, False, f"{whose}; its age is unknown, so it is kept")
    age, limit = now - created, f"{format_duration(max_age)} (--llmperf-cleanup-age)"
    if age > max_age:
        return Judgement(container, True, f"{whose}; created {format_duration(age)} ago, older than {limit}")
    return Judgement(container, False, f"{whose}; created {format_duration(age)} ago, removed once older than {limit}")


def survey(
    client: Any,
    max_age: float = DEFAULT_CLEANUP_AGE,
    *,
    me: Owner | None = None,
    now: float | None = None,
    alive: Callable[[Owner], bool] = is_running,
) -> list[Judgement]:
    """Every container of this plugin on the engine (any state), judged."""
    found = client.containers.list(all=True, filters={"label": PLUGIN_FILTER}, ignore_removed=True)
    me = me or current_owner()
    now = time.time() if now is None else now
    return [judge(c, max_age, me=me, now=now, alive=alive) for c in found]


def find_leftovers(client: Any, max_age: float = DEFAULT_CLEANUP_AGE, **kwargs: Any) -> list[Judgement]:
    """The containers `judge` calls leftovers: what killed sessions left behind."""
    return [j for j in survey(client, max_age, **kwargs) if j.leftover]


def cleanup_leftovers(
    client: Any, max_age: float = DEFAULT_CLEANUP_AGE, **kwargs: Any
) -> tuple[list[Judgement], list[Judgement]]:
    """--llmperf-cleanup: force-remove the leftovers; (removed, kept), each with why."""
    import docker.errors

    removed, kept = [], []
    for judged in survey(client, max_age, **kwargs):
        if not judged.leftover:
            kept.append(judged)
            continue
        try:
            judged.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            judged = Judgement(judged.container, True, f"{judged.reason}; it was gone before cleanup reached it")
        except docker.errors.APIError as exc:
            if not removal_in_progress(exc):
                kept.append(Judgement(judged.container, False, f"{judged.reason}; could not remove it: {exc}"))
                continue
        removed.append(judged)
    return removed, kept


def cleanup_lines(removed: Sequence[Judgement], kept: Sequence[Judgement]) -> list[str]:
    """What --llmperf-cleanup prints: what it removed and what it kept, each with why."""
    if not removed and not kept:
        return ["--llmperf-cleanup: no containers of this plugin on the engine"]
    lines = [f"--llmperf-cleanup: removed {len(removed)} container(s), kept {len(kept)}"]
    lines += [f"  removed {j.line()}" for j in removed]
    lines += [f"  kept {j.line()}" for j in kept]
    return lines


def leftover_lines(leftovers: Sequence[Judgement]) -> list[str]:
    """What a session says at its start about leftovers it finds (none: nothing)."""
    if not leftovers:
        return []
    head = f"{len(leftovers)} container(s) left by sessions that are gone; {CLEANUP_HINT}:"
    return [head, *(f"  {j.line()}" for j in leftovers)]


def check_gpus_free(client: Any, gpu_ids: Sequence[str] | None, max_age: float = DEFAULT_CLEANUP_AGE) -> None:
    """Raise if another GPU server of this plugin runs on one of `gpu_ids` (None: any GPU),
    saying whether it is a leftover to clean up or a live session's to wait for."""
    running = [
        c
        for c in client.containers.list(filters={"label": [PLUGIN_FILTER, f"{LABEL_GPU}=1"]}, ignore_removed=True)
        if gpus_overlap(gpu_ids, (c.labels or {}).get(LABEL_GPUS))
    ]
    if not running:
        return
    judged = [judge(c, max_age) for c in running]
    hints = []
    if any(j.leftover for j in judged):
        hints.append("remove leftovers with pytest --llmperf-cleanup first")
    if not all(j.leftover for j in judged):
        hints.append("wait for the session that owns it to finish")
    raise ServerStartError(
        f"another GPU server of this plugin is still running: {'; '.join(j.line() for j in judged)}. "
        f"One holds most of a GPU's memory, so only one runs at a time"
        f"{' on GPUs ' + ','.join(gpu_ids) if gpu_ids else ''}: {'; '.join(hints)}."
    )
