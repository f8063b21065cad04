"""DockerTarget: run a ServerSpec in a `vllm/vllm-openai`-shaped container as the seeds'
`docker run --gpus all --ipc=host ...` does, and remove it on every way out. Every text
that leaves this module is redacted, and objects holding secrets have masked reprs.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
from pytest_llmperf.servers.leftovers import DEFAULT_CLEANUP_AGE, check_gpus_free, container_labels
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.servers.teardown import ENGINE_GONE, LIVE, remove_container
from pytest_llmperf.util.http import PageError, fetch_version
from pytest_llmperf.util.secrets import RedactedEnv, Secrets, is_secret_name, redact

CONTAINER_PORT = 8000
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
DEFAULT_HF_CACHE = Path("~/.cache/huggingface")
DEFAULT_READY_TIMEOUT = 1800.0  # a 35B FP8 model can take many minutes to load and compile
LOG_TAIL_LINES = 100
GPU_SLOT = threading.Lock()  # GPU servers run one at a time in a session
ProgressFn = Callable[[str], None]


def build_environment(
    spec: ServerSpec, pass_env: Sequence[str], environ: Mapping[str, str]
) -> tuple[RedactedEnv, Secrets, list[str]]:
    """The container's environment, the secret values to scrub, and the names asked for
    but unset here (reported, not fatal: a public model needs no HF_TOKEN)."""
    env = {name: environ[name] for name in pass_env if name in environ}
    missing: list[str] = []
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


def exit_status(container: Any) -> str | None:
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


def status_after_start(container: Any) -> str | None:
    """`exit_status` for a server that served: an engine gone quiet is said, not raised."""
    import docker.errors

    gone: tuple[type[BaseException], ...] = (docker.errors.DockerException, *ENGINE_GONE)
    try:
        return exit_status(container)
    except gone as exc:
        return f"the Docker engine does not answer about container {container.name} ({type(exc).__name__})"


def nvidia_smi(container: Any) -> str:
    code, output = container.exec_run(list(NVIDIA_SMI_QUERY))
    text: str = output.decode("utf-8", errors="replace")
    if code != 0:
        raise RuntimeError(f"nvidia-smi exited with {code}: {text.strip()[:200]}")
    return text


def container_provenance(
    client: Any, image: Any, ref: str, container: Any, base_url: str, gpu: bool, secrets: Secrets
) -> dict[str, Any]:
    """What served: image, engine and vLLM versions, and with `gpu` the GPUs in the container
    (best effort: a failure is recorded, never raised)."""
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
    except Exception:  # noqa: BLE001
        info["docker_engine_version"] = None
    try:
        info["vllm_version"] = fetch_version(base_url, timeout=5.0)
    except PageError:
        pass
    if gpu:
        try:
            info.update(gpu_provenance(parse_nvidia_smi_csv(nvidia_smi(container))))
        except Exception as exc:  # noqa: BLE001
            info["gpu_error"] = redact(f"{type(exc).__name__}: {exc}", secrets)
    return info


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
        # --llmperf-gpus: server name -> its slot's GPU ids (a device request only with gpu).
        self.gpu_slots = {name: [str(d) for d in ids] for name, ids in (gpu_slots or {}).items()}
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
        endpoint_host(self._environ.get("DOCKER_HOST"), publish_host)
        self._client = client
        self._serial = 0

    def _say(self, line: str, secrets: Iterable[str]) -> None:
        if self.progress is not None:
            self.progress(redact(line, secrets))

    def client(self) -> Any:
        """The engine's client (DOCKER_HOST, else the local socket), connected once."""
        if self._client is None:
            try:
                self._client = connect(self._environ)
            except Exception as exc:  # noqa: BLE001 - every cause means the same to the user
                where = self._environ.get("DOCKER_HOST") or "the local socket"
                raise ServerStartError(
                    f"no Docker engine answers at {where}: {type(exc).__name__}: {exc}. "
                    "Start dockerd (or set DOCKER_HOST to a reachable engine)."
                ) from None
        return self._client

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

    def _published_url(self, container: Any) -> str | None:
        container.reload()
        ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        bindings = ports.get(f"{CONTAINER_PORT}/tcp") or []
        for binding in bindings:
            if binding.get("HostPort"):
                host = endpoint_host(self._environ.get("DOCKER_HOST"), self.publish_host)
                host = f"[{host}]" if ":" in host else host  # an IPv6 address, in a URL
                return f"http://{host}:{binding['HostPort']}"
        return None

    def _death(self, container: Any, secrets: Secrets) -> str | None:
        """None while the container runs; else its exit code and log tail."""
        status = exit_status(container)
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

    # Raw exceptions become redacted messages raised after the `except` blocks, so no frame holds one.
    @contextmanager
    def start(self, spec: ServerSpec) -> Iterator[Endpoint]:
        environment, secrets, missing = build_environment(spec, self.pass_env, self._environ)
        for name in missing:
            self._say(f"llmperf: {name} is not set in this environment; not passed to the container", secrets)
        if self.gpu and not GPU_SLOT.acquire(blocking=False):
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
                    remove_container(container, self.stop_timeout, self.progress)
            finally:
                if self.gpu:
                    GPU_SLOT.release()

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
        except ENGINE_GONE as exc:  # the engine's host went away (requests' errors are not DockerException)
            where = self._environ.get("DOCKER_HOST") or "the local socket"
            failure = redact(
                f"the Docker engine at {where} stopped answering while starting {spec.name}: "
                f"{type(exc).__name__}: {exc}. Check that host is up and its engine answers",
                secrets,
            )
        raise ServerStartError(failure)

    def _launch_steps(
        self, spec: ServerSpec, environment: RedactedEnv, secrets: Secrets, launched: list[Any]
    ) -> Endpoint:
        client = self.client()
        gpu_ids = self.gpu_ids(spec)
        if self.gpu:
            check_gpus_free(client, gpu_ids, self.cleanup_age)
        ref = self.image_override or spec.image
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
        base_url = self._published_url(container)
        if base_url is None:
            death = self._death(container, secrets) or "the engine published no port for 8000/tcp"
            raise ServerStartError(f"{spec.name} did not start: {death}")
        self._wait_ready(container, spec, base_url, secrets)
        provenance = container_provenance(client, image, ref, container, base_url, self.gpu, secrets)
        if gpu_ids:
            provenance["gpu_ids"] = list(gpu_ids)
        memory_sampler = None
        if self.gpu:  # the session opens one window per run: the peak is that run's
            read = functools.partial(nvidia_smi, container)
            memory_sampler = functools.partial(sampling_peak_memory, read, interval=self.gpu_sample_interval)
        return Endpoint(
            base_url=base_url,
            model=spec.model_id,
            target=self.name,
            provenance=provenance,
            memory_sampler=memory_sampler,
            exit_status=functools.partial(status_after_start, container),
            log_tail=functools.partial(_log_tail, container, secrets=secrets),
        )
