"""DockerTarget: run a ServerSpec in a `vllm/vllm-openai`-shaped container.

Reproduces the seeds' `docker run --gpus all --ipc=host -p 8000:8000 -v
~/.cache/huggingface:/root/.cache/huggingface --env HF_TOKEN IMAGE MODEL --host 0.0.0.0
--port 8000 ...` through the docker SDK, waits for the model, records provenance and
removes the container on every way out (normal exit, failure, Ctrl-C, SIGTERM).

Secrets: every text that leaves this module (exception messages, progress lines, log
tails) goes through `redact()`, and objects holding secret values have masked reprs,
so `pytest -l` (locals in tracebacks) cannot print them either.
"""

from __future__ import annotations

import atexit
import functools
import ipaddress
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import (
    NVIDIA_SMI_QUERY,
    gpu_provenance,
    parse_nvidia_smi_csv,
    sampling_peak_memory,
)
from pytest_llmperf.servers.owners import Owner, current_owner, is_running, process_name
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.http import PageError, fetch_version
from pytest_llmperf.util.secrets import RedactedEnv, Secrets, is_secret_name, redact

LABEL_PLUGIN = "io.pytest-llmperf.plugin"
LABEL_SESSION = "io.pytest-llmperf.session"
LABEL_SPEC = "io.pytest-llmperf.spec"
LABEL_MODEL = "io.pytest-llmperf.model"
LABEL_GPU = "io.pytest-llmperf.gpu"
# The GPU ids of the container's slot (--llmperf-gpus): "0,1"; "all" for a GPU server
# given every GPU; absent on a container without GPUs or slot.
LABEL_GPUS = "io.pytest-llmperf.gpus"
# The owner (servers/owners.py) and when the container was made: what --llmperf-cleanup
# reads to tell a leftover from another session's live server.
LABEL_OWNER_HOST = "io.pytest-llmperf.owner.host"
LABEL_OWNER_PID = "io.pytest-llmperf.owner.pid"
LABEL_OWNER_START = "io.pytest-llmperf.owner.start"
LABEL_OWNER_BOOT = "io.pytest-llmperf.owner.boot"
LABEL_OWNER_PIDNS = "io.pytest-llmperf.owner.pidns"
LABEL_CREATED = "io.pytest-llmperf.created"
PLUGIN_NAME = "pytest-llmperf"
PLUGIN_FILTER = f"{LABEL_PLUGIN}={PLUGIN_NAME}"

CONTAINER_PORT = 8000
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
DEFAULT_HF_CACHE = Path("~/.cache/huggingface")
DEFAULT_READY_TIMEOUT = 1800.0  # a 35B FP8 model can take many minutes to load and compile
LOG_TAIL_LINES = 100
# A container whose owner cannot be checked (another host, or no owner labels) is a
# leftover once it is older than this (--llmperf-cleanup-age).
DEFAULT_CLEANUP_AGE = 24 * 3600.0
CLEANUP_HINT = "remove with pytest --llmperf-cleanup"

ProgressFn = Callable[[str], None]


# --------------------------------------------------------------------------- environment


def build_environment(
    spec: ServerSpec, pass_env: Sequence[str], environ: Mapping[str, str]
) -> tuple[RedactedEnv, Secrets, list[str]]:
    """The container's environment, the secret values to scrub, and the names asked for
    but unset here (reported, not fatal: a public model needs no HF_TOKEN)."""
    env: dict[str, str] = {}
    missing: list[str] = []
    for name in pass_env:
        if name in environ:
            env[name] = environ[name]
    for name, value in spec.env.items():
        if value is not None:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
        else:
            missing.append(name)
    env.update(spec.launch_env())  # last: vLLM's --api-key wins over VLLM_API_KEY
    names = spec.secret_names() | {n for n in pass_env if is_secret_name(n)}
    values = [env.get(n) for n in names] + [environ.get(n) for n in names]
    return RedactedEnv(env, names), Secrets(values), missing


# --------------------------------------------------------------------------- pure helpers


def engine_host(docker_host: str | None) -> str | None:
    """The remote engine's host name from DOCKER_HOST, or None for a local engine."""
    if not docker_host:
        return None
    parts = urlsplit(docker_host)
    if parts.scheme in ("unix", "npipe", "fd"):
        return None
    if parts.scheme not in ("tcp", "http", "https", "ssh"):
        raise ValueError(
            f"DOCKER_HOST={docker_host!r}: unsupported scheme {parts.scheme!r} "
            "(use unix://, tcp://HOST:PORT or ssh://USER@HOST)"
        )
    host = parts.hostname
    if not host:
        raise ValueError(f"DOCKER_HOST={docker_host!r} names no host")
    if host in ("localhost", "::1") or host.startswith("127."):
        return None
    return host


def endpoint_host(docker_host: str | None, publish_host: str) -> str:
    """Where this process reaches a port the engine published on `publish_host`."""
    wildcard = publish_host in ("0.0.0.0", "::")
    remote = engine_host(docker_host)
    if remote is None:
        return "127.0.0.1" if wildcard else publish_host
    if wildcard:
        return remote
    if ipaddress.ip_address(publish_host).is_loopback:
        raise ValueError(
            f"DOCKER_HOST={docker_host!r} is a remote engine: a port published on {publish_host} "
            f"there is not reachable from here. Publish on that host's address or on 0.0.0.0 "
            f"(--llmperf-publish-host, or DockerTarget publish_host), or tunnel the port and use --llmperf-base-url."
        )
    return publish_host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def owner_labels(owner: Owner) -> dict[str, str]:
    return {
        LABEL_OWNER_HOST: owner.host,
        LABEL_OWNER_PID: str(owner.pid),
        LABEL_OWNER_START: owner.start,
        LABEL_OWNER_BOOT: owner.boot,
        LABEL_OWNER_PIDNS: owner.pidns,
    }


def owner_from_labels(labels: Mapping[str, str]) -> Owner | None:
    """The owner a container recorded; None without owner labels (an older version of
    the plugin made it) or with ones that name no process."""
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


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    """The plugin's labels: session, spec, model, GPU (and its slot's GPU ids), and the
    owner (default: this process) and creation time (default: now) that --llmperf-cleanup
    judges by."""
    slot = {LABEL_GPUS: ",".join(gpu_ids)} if gpu_ids else ({LABEL_GPUS: "all"} if gpu else {})
    return {
        **slot,
        LABEL_PLUGIN: PLUGIN_NAME,
        LABEL_SESSION: session_id,
        LABEL_SPEC: spec.name,
        LABEL_MODEL: spec.model,
        LABEL_GPU: "1" if gpu else "0",
        **owner_labels(owner or current_owner()),
        LABEL_CREATED: _utc(time.time() if created is None else created),
    }


def created_at(container: Any) -> float | None:
    """When the container was made: its label, else the engine's record (containers of
    older versions), else None."""
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


def container_name(spec: ServerSpec, session_id: str, serial: int) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_.-]+", "-", spec.name).strip("-.")[:40] or "server"
    return f"llmperf-{slug}-{session_id[:12]}-{serial}"


def gpu_device_requests(gpu: bool, device_ids: Sequence[str] | None) -> list[Any]:
    """`--gpus all` or `--gpus '"device=0,1"'` as the SDK's DeviceRequest; none without gpu."""
    import docker.types

    if not gpu:
        return []
    if device_ids:
        return [docker.types.DeviceRequest(device_ids=list(device_ids), capabilities=[["gpu"]])]
    return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]


def gpus_overlap(ours: Sequence[str] | None, label: str | None) -> bool:
    """Whether a running GPU container whose LABEL_GPUS is `label` may use one of the GPUs
    `ours` names (None: every GPU). A container without the label (an older version) or
    with "all" may use any."""
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


def _log_tail(container: Any, lines: int, secrets: Iterable[str]) -> str:
    try:
        raw = container.logs(stdout=True, stderr=True, tail=lines)
    except Exception as exc:  # noqa: BLE001 - a missing log must not hide the real error
        return f"(could not read the container log: {type(exc).__name__})"
    text = raw.decode("utf-8", errors="replace").rstrip()
    return redact(text, secrets) if text else "(the container wrote no log)"


def _last_line(container: Any, secrets: Iterable[str]) -> str:
    try:
        raw = container.logs(stdout=True, stderr=True, tail=3)
    except Exception:  # noqa: BLE001 - progress is best effort
        return ""
    lines = [ln.strip() for ln in raw.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    return redact(lines[-1][:160], secrets) if lines else ""


# --------------------------------------------------------------------------- live containers


class _LiveContainers:
    """Containers this process runs. While any runs, SIGTERM removes them first and then
    does what the previous handler would; at interpreter exit any left are removed."""

    def __init__(self) -> None:
        # Reentrant: the SIGTERM handler runs on the main thread, maybe inside add/discard.
        self._lock = threading.RLock()
        self._live: dict[str, tuple[str, Any]] = {}
        self._previous: Any = None
        self._installed = False
        self._atexit = False

    def add(self, container_id: str, name: str, client: Any) -> None:
        with self._lock:
            self._live[container_id] = (name, client)
            if not self._atexit:
                atexit.register(self.remove_all)
                self._atexit = True
            if not self._installed and threading.current_thread() is threading.main_thread():
                previous = signal.signal(signal.SIGTERM, self._on_sigterm)
                # None: a handler set outside Python; the closest restorable one is the default.
                self._previous = signal.SIG_DFL if previous is None else previous
                self._installed = True

    def discard(self, container_id: str) -> None:
        with self._lock:
            self._live.pop(container_id, None)
            if not self._live:
                self._restore()

    def names(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self._live.values()]

    def _restore(self) -> None:
        if self._installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def remove_all(self) -> list[str]:
        with self._lock:
            live = dict(self._live)
            self._live.clear()
        removed = []
        for container_id, (name, client) in live.items():
            try:
                client.api.remove_container(container_id, force=True, v=True)
                removed.append(name)
            except Exception:  # noqa: BLE001 - already gone, or the engine is gone
                pass
        return removed

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.remove_all()
        previous = self._previous
        with self._lock:
            self._restore()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            # The default action: die of SIGTERM, now that nothing of ours is left running.
            os.kill(os.getpid(), signum)


LIVE = _LiveContainers()
_GPU_SLOT = threading.Lock()


def _engine_gone_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises when the engine's host is gone: requests' connection errors
    (not DockerException) and the socket's own."""
    try:
        import requests.exceptions

        return (requests.exceptions.ConnectionError, requests.exceptions.Timeout, OSError)
    except ImportError:  # pragma: no cover - the docker SDK depends on requests
        return (OSError,)


_ENGINE_GONE = _engine_gone_errors()


# --------------------------------------------------------------------------- leftovers


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
    """The rule of --llmperf-cleanup. Owner on this machine (`me`'s): a leftover when
    that process is gone (not running, or its pid is another process now); never while it
    runs, however old the container. Owner elsewhere, or none recorded (an older version
    made the container): a leftover once older than `max_age`."""
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
    """Every container of this plugin on the engine (any state), judged; one removed
    while the engine lists them is left out."""
    found = client.containers.list(all=True, filters={"label": PLUGIN_FILTER}, ignore_removed=True)
    me = me or current_owner()
    now = time.time() if now is None else now
    return [judge(c, max_age, me=me, now=now, alive=alive) for c in found]


def find_leftovers(client: Any, max_age: float = DEFAULT_CLEANUP_AGE, **kwargs: Any) -> list[Judgement]:
    """The containers `judge` calls leftovers: what killed sessions left behind."""
    return [j for j in survey(client, max_age, **kwargs) if j.leftover]


def _removal_in_progress(exc: Exception) -> bool:
    """409 from `remove`: someone else is removing it already (the container is going)."""
    return getattr(exc, "status_code", None) == 409 and "already in progress" in str(exc)


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
            if not _removal_in_progress(exc):
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


# --------------------------------------------------------------------------- the target


def connect(environ: Mapping[str, str], timeout: float | None = None) -> Any:
    """A client of the engine DOCKER_HOST names (else the local socket), pinged. ssh://
    goes through the system's ssh client, so ~/.ssh/config and agents apply."""
    import docker

    use_ssh = (environ.get("DOCKER_HOST") or "").startswith("ssh://")
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    client = docker.from_env(environment=dict(environ), use_ssh_client=use_ssh, **extra)
    client.ping()
    return client


class DockerTarget:
    """Starts one container per `start(spec)`; see the module docstring."""

    name = "docker"
    starts_servers = True

    def __init__(
        self,
        *,
        gpu: bool = False,
        gpu_device_ids: Sequence[str] | None = None,
        gpu_slots: Mapping[str, Sequence[str]] | None = None,
        docker_hosts: Mapping[str, str] | None = None,
        image_override: str | None = None,
        hf_cache: Path | str | None = DEFAULT_HF_CACHE,
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        publish_host: str = "127.0.0.1",
        host_port: int | None = None,
        session_id: str | None = None,
        pass_env: Sequence[str] = ("HF_TOKEN",),
        progress: ProgressFn | None = None,
        client: Any = None,
        pull: bool = True,
        stop_timeout: float = 10.0,
        log_tail_lines: int = LOG_TAIL_LINES,
        gpu_sample_interval: float = 2.0,
        progress_interval: float = 2.0,
        environ: Mapping[str, str] | None = None,
        cleanup_age: float = DEFAULT_CLEANUP_AGE,
    ) -> None:
        if gpu_device_ids is not None:
            gpu_device_ids = [str(d).strip() for d in gpu_device_ids]
            if not gpu:
                raise ValueError("gpu_device_ids given without gpu=True (--llmperf-gpu)")
            if not gpu_device_ids or not all(gpu_device_ids):
                raise ValueError(f"gpu_device_ids must be non-empty ids like ['0', '1'], got {gpu_device_ids!r}")
        if not ready_timeout or ready_timeout <= 0:
            raise ValueError(f"ready_timeout must be > 0 seconds, got {ready_timeout!r}")
        try:
            ipaddress.ip_address(publish_host)
        except ValueError:
            raise ValueError(f"publish_host must be an IP address such as 127.0.0.1, got {publish_host!r}") from None
        if host_port is not None and not 0 < int(host_port) < 65536:
            raise ValueError(f"host_port must be 1..65535 (or None for a free port), got {host_port!r}")
        if image_override is not None and not image_override.strip():
            raise ValueError("image_override must name an image, got an empty string")
        for name in pass_env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"pass_env names environment variables; {name!r} is not one")
        self.gpu = gpu
        self.gpu_device_ids = gpu_device_ids
        # --llmperf-gpus: server name -> its slot's GPU ids (plan.py). With gpu, the
        # container's device request; without, a label and provenance only.
        self.gpu_slots = {name: [str(d) for d in ids] for name, ids in (gpu_slots or {}).items()}
        # --llmperf-hosts: server name -> the DOCKER_HOST of its slot's engine (else the environment's).
        self.docker_hosts = dict(docker_hosts or {})
        self.image_override = image_override
        self.hf_cache = None if hf_cache is None else Path(hf_cache)
        self.ready_timeout = float(ready_timeout)
        self.publish_host = publish_host
        self.host_port = host_port
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.pass_env = tuple(pass_env)
        self.progress = progress
        self.pull = pull
        self.stop_timeout = stop_timeout
        self.log_tail_lines = log_tail_lines
        self.gpu_sample_interval = gpu_sample_interval
        self.progress_interval = progress_interval
        self._environ = os.environ if environ is None else environ
        self.cleanup_age = cleanup_age
        # A remote engine with a loopback-only port is unusable: say so before starting anything.
        for url in {self._environ.get("DOCKER_HOST"), *self.docker_hosts.values()}:
            endpoint_host(url, publish_host)
        self._client = client
        self._clients: dict[str, Any] = {}  # DOCKER_HOST of --llmperf-hosts -> its client
        self._serial = 0

    # -- small steps

    def _say(self, line: str, secrets: Iterable[str]) -> None:
        if self.progress is not None:
            self.progress(redact(line, secrets))

    def docker_host(self, spec: ServerSpec | None = None) -> str | None:
        """The DOCKER_HOST `spec`'s server runs on: its slot's host, else the environment's."""
        return (self.docker_hosts.get(spec.name) if spec is not None else None) or self._environ.get("DOCKER_HOST")

    def client(self, spec: ServerSpec | None = None) -> Any:
        url = self.docker_hosts.get(spec.name) if spec is not None else None
        if url is None and self._client is not None:
            return self._client
        if url is not None and url in self._clients:
            return self._clients[url]
        environ = {**self._environ, "DOCKER_HOST": url} if url is not None else self._environ
        try:
            client = connect(environ)
        except Exception as exc:  # noqa: BLE001 - every cause means the same to the user
            where = environ.get("DOCKER_HOST") or "the local socket"
            fix = (
                "check that host (--llmperf-hosts)"
                if url
                else "Start dockerd (or set DOCKER_HOST to a reachable engine)."
            )
            raise ServerStartError(f"no Docker engine answers at {where}: {type(exc).__name__}: {exc}. {fix}") from None
        if url is None:
            self._client = client
        else:
            self._clients[url] = client
        return client

    def image_for(self, spec: ServerSpec) -> str:
        return self.image_override or spec.image

    def ensure_image(self, client: Any, ref: str, secrets: Secrets) -> Any:
        """The image, pulled with progress when missing; a clear error naming it otherwise."""
        import docker.errors

        try:
            return client.images.get(ref)
        except docker.errors.ImageNotFound:
            pass
        if not self.pull:
            raise ServerStartError(f"image {ref!r} is not present on the Docker engine and pulling is off")
        self._say(f"llmperf: pulling image {ref} ...", secrets)
        last = 0.0
        failure = ""
        try:
            for event in client.api.pull(ref, stream=True, decode=True):
                if "error" in event:
                    raise docker.errors.APIError(str(event["error"]))
                now = time.monotonic()
                if now - last >= self.progress_interval:
                    last = now
                    detail = " ".join(str(event.get(k, "")) for k in ("id", "status", "progress")).strip()
                    self._say(f"llmperf: pulling {ref}: {detail}", secrets)
            return client.images.get(ref)
        except docker.errors.DockerException as exc:
            failure = redact(
                f"image {ref!r} is not present on the Docker engine and could not be pulled: {exc}. "
                "Pull or load it on the engine's host, or choose another image with --llmperf-image.",
                secrets,
            )
        raise ServerStartError(failure)

    def gpu_ids(self, spec: ServerSpec) -> list[str] | None:
        """The GPU ids `spec`'s server gets: its slot's, else gpu_device_ids; None: every GPU."""
        return self.gpu_slots.get(spec.name) or self.gpu_device_ids

    def _check_no_other_gpu_server(self, client: Any, gpu_ids: Sequence[str] | None = None) -> None:
        running = [
            c
            for c in client.containers.list(filters={"label": [PLUGIN_FILTER, f"{LABEL_GPU}=1"]}, ignore_removed=True)
            if gpus_overlap(gpu_ids, (c.labels or {}).get(LABEL_GPUS))
        ]
        if not running:
            return
        judged = [judge(c, self.cleanup_age) for c in running]
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

    def _published_url(self, container: Any, docker_host: str | None = None) -> str | None:
        container.reload()
        ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        bindings = ports.get(f"{CONTAINER_PORT}/tcp") or []
        for binding in bindings:
            if binding.get("HostPort"):
                host = endpoint_host(docker_host or self._environ.get("DOCKER_HOST"), self.publish_host)
                return f"http://{_url_host(host)}:{binding['HostPort']}"
        return None

    @staticmethod
    def _exit_status(container: Any) -> str | None:
        """None while the container runs; else how it ended (exit code, out of memory)."""
        import docker.errors

        try:
            container.reload()
        except docker.errors.NotFound:
            return "the container was removed by someone else"
        state = container.attrs.get("State") or {}
        if state.get("Status") in ("created", "running", "restarting"):
            return None
        oom = " (killed: out of memory)" if state.get("OOMKilled") else ""
        return f"container {container.name} exited with code {state.get('ExitCode')}{oom}"

    @classmethod
    def _status_after_start(cls, container: Any) -> str | None:
        """`_exit_status` for a server that served: an engine gone quiet is said, not raised."""
        import docker.errors

        gone: tuple[type[BaseException], ...] = (docker.errors.DockerException, *_ENGINE_GONE)
        try:
            return cls._exit_status(container)
        except gone as exc:
            return f"the Docker engine does not answer about container {container.name} ({type(exc).__name__})"

    def _death(self, container: Any, secrets: Secrets) -> str | None:
        """None while the container runs; else its exit code and log tail."""
        status = self._exit_status(container)
        if status is None or not status.startswith("container "):
            return status
        return f"{status}; last {self.log_tail_lines} log lines:\n{_log_tail(container, self.log_tail_lines, secrets)}"

    def _wait_ready(self, container: Any, spec: ServerSpec, base_url: str, secrets: Secrets) -> None:
        last_report = [-1e9]

        def on_progress(elapsed: float, status: str) -> None:
            if self.progress is None or elapsed - last_report[0] < self.progress_interval:
                return
            last_report[0] = elapsed
            line = _last_line(container, secrets)
            self._say(
                f"llmperf: {spec.name} loading in {container.name}: {elapsed:.0f}s of "
                f"{self.ready_timeout:.0f}s, {status}" + (f" | {line}" if line else ""),
                secrets,
            )

        try:
            wait_until_ready(
                base_url,
                spec.model_id,
                self.ready_timeout,
                is_alive=lambda: self._death(container, secrets),
                on_progress=on_progress,
            )
        except ServerStartError as exc:
            message = redact(str(exc), secrets)
        else:
            return
        if "exited with code" not in message:
            message += (
                f"\ncontainer {container.name} still running; it is being removed. "
                f"Last {self.log_tail_lines} log lines:\n{_log_tail(container, self.log_tail_lines, secrets)}"
            )
        raise ServerStartError(message)

    def _provenance(self, client: Any, image: Any, ref: str, container: Any, base_url: str) -> dict[str, Any]:
        digests = image.attrs.get("RepoDigests") or []
        info: dict[str, Any] = {
            "image": ref,
            "image_id": image.id,
            "image_digest": digests[0] if digests else None,
            "container": container.name,
            "vllm_version": None,
        }
        try:
            info["docker_engine_version"] = client.version().get("Version")
        except Exception:  # noqa: BLE001 - provenance is best effort
            info["docker_engine_version"] = None
        try:
            info["vllm_version"] = fetch_version(base_url, timeout=5.0)
        except PageError:
            pass
        return info

    def _nvidia_smi(self, container: Any) -> str:
        code, output = container.exec_run(list(NVIDIA_SMI_QUERY))
        text: str = output.decode("utf-8", errors="replace")
        if code != 0:
            raise RuntimeError(f"nvidia-smi exited with {code}: {text.strip()[:200]}")
        return text

    # -- the lifecycle
    #
    # Raw exceptions are turned into redacted messages inside `except` blocks but raised
    # after them, so no frame of a traceback (`pytest -l` prints their locals) holds one.

    def start(self, spec: ServerSpec) -> Any:
        return self._run(spec)

    @contextmanager
    def _run(self, spec: ServerSpec) -> Iterator[Endpoint]:
        environment, secrets, missing = build_environment(spec, self.pass_env, self._environ)
        for name in missing:
            self._say(f"llmperf: {name} is not set in this environment; not passed to the container", secrets)
        if self.gpu and not _GPU_SLOT.acquire(blocking=False):
            raise ServerStartError(
                f"cannot start {spec.name}: this session already runs a GPU server "
                f"({', '.join(LIVE.names())}); GPU servers run one at a time"
            )
        launched: list[Any] = []  # the container, as soon as it exists, for the teardown
        try:
            endpoint = self._launch(spec, environment, secrets, launched)
            self._say(f"llmperf: {spec.name} ready at {endpoint.base_url}", secrets)
            yield endpoint
        finally:
            try:
                for container in launched:
                    self._remove(container)
            finally:
                if self.gpu:
                    _GPU_SLOT.release()

    def _launch(self, spec: ServerSpec, environment: RedactedEnv, secrets: Secrets, launched: list[Any]) -> Endpoint:
        import docker.errors

        failure = None
        try:
            return self._launch_steps(spec, environment, secrets, launched)
        except docker.errors.DockerException as exc:
            hint = ""
            if "could not select device driver" in str(exc):
                hint = (
                    ". The engine has no GPU runtime: install the NVIDIA Container Toolkit on its "
                    "host (nvidia-ctk runtime configure --runtime=docker), or run without --llmperf-gpu"
                )
            failure = redact(f"Docker engine error while starting {spec.name}: {exc}{hint}", secrets)
        except _ENGINE_GONE as exc:  # the engine's host went away (requests' errors are not DockerException)
            where = self.docker_host(spec) or "the local socket"
            failure = redact(
                f"the Docker engine at {where} stopped answering while starting {spec.name}: "
                f"{type(exc).__name__}: {exc}. Check that host is up and its engine answers",
                secrets,
            )
        raise ServerStartError(failure)

    def _launch_steps(
        self, spec: ServerSpec, environment: RedactedEnv, secrets: Secrets, launched: list[Any]
    ) -> Endpoint:
        client = self.client(spec)
        gpu_ids = self.gpu_ids(spec)
        if self.gpu:
            self._check_no_other_gpu_server(client, gpu_ids)
        ref = self.image_for(spec)
        image = self.ensure_image(client, ref, secrets)
        self._serial += 1
        volumes = {}
        if self.hf_cache is not None:
            volumes[str(self.hf_cache.expanduser())] = {"bind": CONTAINER_HF_CACHE, "mode": "rw"}
        container = client.containers.create(
            image.id,
            command=spec.vllm_args(host="0.0.0.0", port=CONTAINER_PORT),
            name=container_name(spec, self.session_id, self._serial),
            environment=environment,
            labels=container_labels(self.session_id, spec, self.gpu, gpu_ids=gpu_ids),
            ports={f"{CONTAINER_PORT}/tcp": (self.publish_host, self.host_port)},
            volumes=volumes,
            ipc_mode="host",
            init=True,
            device_requests=gpu_device_requests(self.gpu, gpu_ids),
            detach=True,
        )
        launched.append(container)
        LIVE.add(container.id, container.name, client)
        self._say(f"llmperf: starting {spec.name} in container {container.name} ({ref})", secrets)
        container.start()
        base_url = self._published_url(container, self.docker_hosts.get(spec.name))
        if base_url is None:
            death = self._death(container, secrets) or "the engine published no port for 8000/tcp"
            raise ServerStartError(f"{spec.name} did not start: {death}")
        self._wait_ready(container, spec, base_url, secrets)
        provenance = self._provenance(client, image, ref, container, base_url)
        if gpu_ids:
            provenance["gpu_ids"] = list(gpu_ids)
        if spec.name in self.docker_hosts:  # which engine of --llmperf-hosts ran it
            provenance["docker_host"] = self.docker_hosts[spec.name]
        memory_sampler = None
        if self.gpu:
            try:
                provenance.update(gpu_provenance(parse_nvidia_smi_csv(self._nvidia_smi(container))))
            except Exception as exc:  # noqa: BLE001 - provenance must not fail the run
                provenance["gpu_error"] = redact(f"{type(exc).__name__}: {exc}", secrets)
            # The session opens one window per run: the peak belongs to that run's provenance.
            read = functools.partial(self._nvidia_smi, container)
            memory_sampler = functools.partial(sampling_peak_memory, read, interval=self.gpu_sample_interval)
        return Endpoint(
            base_url=base_url,
            model=spec.model_id,
            target=self.name,
            provenance=provenance,
            memory_sampler=memory_sampler,
            exit_status=functools.partial(self._status_after_start, container),
            log_tail=functools.partial(_log_tail, container, secrets=secrets),
        )

    def _remove(self, container: Any) -> None:
        import docker.errors

        try:
            try:
                container.stop(timeout=self.stop_timeout)
            except docker.errors.APIError:
                pass  # already stopped or gone; remove(force) below settles it
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if not _removal_in_progress(exc):  # someone else removing it: gone all the same
                raise
        except _ENGINE_GONE as exc:  # the host died (--llmperf-hosts): the rest of the suite goes on
            self._say(
                f"llmperf: could not remove container {container.name}: its Docker engine does not answer "
                f"({type(exc).__name__}); once that host is back, pytest --llmperf-cleanup there removes it",
                (),
            )
        finally:
            LIVE.discard(container.id)
