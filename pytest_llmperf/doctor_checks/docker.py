"""The Docker checks: the engine answers, its GPU runtime, an image present (or pullable),
nvidia-smi in a throwaway labelled container of the image (removed on every way out),
and the address containers publish their port on."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.doctor_checks.check import FAIL, GIB, OK, SKIP, WARN, Check, last_lines
from pytest_llmperf.servers.gpu_info import NVIDIA_SMI_QUERY, GpuInfo, parse_nvidia_smi_csv
from pytest_llmperf.servers.spec import ServerSpec

DOCTOR_SPEC = ServerSpec(name="llmperf-doctor", model="nvidia-smi")  # its container's labels
NVIDIA_TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit on the engine's host, then "
    "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` "
    "(or generate CDI specs: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"
)


def engine_address(environ: Mapping[str, str]) -> str:
    host = environ.get("DOCKER_HOST")
    return f"{host} (DOCKER_HOST)" if host else "unix:///var/run/docker.sock (DOCKER_HOST unset)"


def check_engine(environ: Mapping[str, str], timeout: float) -> tuple[Check, Any]:
    """The Docker Engine answers: (check, client or None)."""
    from pytest_llmperf.servers.docker import connect

    where = engine_address(environ)
    try:
        client = connect(environ, timeout=timeout)
        version = client.version().get("Version", "?")
    except Exception as exc:  # noqa: BLE001 - every cause means "no engine" here
        text = f"{type(exc).__name__}: {exc}"
        if "Permission denied" in text or "PermissionError" in text:
            fix = "add yourself to the docker group (`sudo usermod -aG docker $USER`, then log in again)"
        elif environ.get("DOCKER_HOST"):
            fix = "check that DOCKER_HOST names a running engine you can reach (e.g. ssh://user@gpu-box)"
        else:
            fix = "start the engine (`sudo systemctl start docker`, or `dockerd &`), or set DOCKER_HOST"
        return Check("Docker Engine", FAIL, f"no engine answers at {where}: {text[:300]}", fix), None
    return Check("Docker Engine", OK, f"Docker Engine {version} answers at {where}"), client


def gpu_runtime_check(info: Mapping[str, Any]) -> Check:
    """From `docker info`: the NVIDIA runtime, or CDI devices of NVIDIA GPUs."""
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    cdi = [
        str(d.get("ID", ""))
        for d in info.get("DiscoveredDevices") or []
        if str(d.get("Source", "")) == "cdi" and str(d.get("ID", "")).startswith("nvidia.com/gpu")
    ]
    name = "GPU support in Docker"
    if "nvidia" in runtimes:
        default = " (the default runtime)" if info.get("DefaultRuntime") == "nvidia" else ""
        return Check(name, OK, f"NVIDIA runtime registered{default}; runtimes: {', '.join(runtimes)}")
    if cdi:
        return Check(name, OK, f"CDI GPU devices: {', '.join(cdi)}")
    return Check(
        name,
        FAIL,
        f"no NVIDIA runtime (runtimes: {', '.join(runtimes) or 'none'}) and no CDI GPU devices",
        NVIDIA_TOOLKIT_FIX,
    )


def check_image(client: Any, ref: str, *, pull: bool) -> tuple[Check, Any]:
    """The image on the engine (id, digest), else whether its registry knows it."""
    import docker.errors

    name = f"image {ref}"
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        image = None
    except docker.errors.DockerException as exc:
        detail = f"the engine could not look it up: {engine_error(exc)}"
        return Check(name, FAIL, detail, "check the engine (see above)"), None
    if image is not None:
        digests = image.attrs.get("RepoDigests") or []
        digest = digests[0].partition("@")[2] if digests else "no repo digest (built or loaded here)"
        size = image.attrs.get("Size")
        shown = f", {size / GIB:.1f} GiB" if isinstance(size, (int, float)) else ""
        return Check(name, OK, f"present: id {image.id[:19]}, digest {digest}{shown}"), image
    fix = (
        f"`docker pull {ref}` on the engine's host (or `docker load` it there where no registry is "
        "reachable), or choose another image with --image / --llmperf-image"
    )
    if pull:
        try:
            client.images.pull(ref)
            image = client.images.get(ref)
        except docker.errors.DockerException as exc:
            return Check(name, FAIL, f"not present, and the pull failed: {engine_error(exc)}", fix), None
        return Check(name, OK, f"pulled: id {image.id[:19]}"), image
    try:
        data = client.images.get_registry_data(ref)
    except docker.errors.DockerException as exc:
        detail = f"not present on the engine, and its registry cannot be asked: {engine_error(exc)}"
        return Check(name, FAIL, detail, fix), None
    digest = getattr(data, "id", "") or "?"
    return (
        Check(
            name,
            WARN,
            f"not present on the engine; pullable (registry digest {digest}); the first server start pulls it",
            f"pull it now (`docker pull {ref}`, or `llmperf doctor --pull`) so the first start does not wait",
        ),
        None,
    )


def engine_error(exc: BaseException, limit: int = 300) -> str:
    """What the engine said (an APIError's explanation), without the request URL around it."""
    explanation = getattr(exc, "explanation", None)
    text = str(explanation if explanation else exc)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_gpus(gpus: Sequence[GpuInfo]) -> str:
    """`2 x NVIDIA H200, driver 570.133.20, 143771 MiB each (2 used)`."""
    names = sorted({g.name for g in gpus})
    drivers = sorted({g.driver_version for g in gpus})
    totals = sorted({g.memory_total_mib for g in gpus if g.memory_total_mib is not None})
    used = [g.memory_used_mib for g in gpus if g.memory_used_mib is not None]
    memory = f", {' / '.join(str(t) for t in totals)} MiB each" if totals else ""
    in_use = f" ({sum(used)} MiB in use)" if used else ""
    return f"{len(gpus)} x {' + '.join(names)}, driver {' + '.join(drivers)}{memory}{in_use}"


def doctor_labels(session_id: str) -> dict[str, str]:
    """The plugin's container labels, gpu=0: no GPU server for a running suite to wait on."""
    from pytest_llmperf.servers.leftovers import container_labels

    return container_labels(session_id, DOCTOR_SPEC, gpu=False)


def check_gpus_in_image(client: Any, ref: str, image: Any, *, gpu_request: bool, timeout: float) -> Check:
    """A throwaway container of the image runs NVIDIA_SMI_QUERY with the GPUs requested;
    removed however this ends."""
    import docker.errors

    from pytest_llmperf.servers.docker import gpu_device_requests
    from pytest_llmperf.servers.teardown import LIVE

    name = f"GPUs in {ref}"
    session_id = "doctor-" + uuid.uuid4().hex[:10]
    container = None
    detail, fix = "", ""
    try:
        container = client.containers.create(
            image.id,
            entrypoint=[NVIDIA_SMI_QUERY[0]],
            command=list(NVIDIA_SMI_QUERY[1:]),
            name=f"llmperf-doctor-{session_id[7:]}",
            labels=doctor_labels(session_id),
            device_requests=gpu_device_requests(gpu_request, None),
            network_disabled=True,
            detach=True,
        )
        LIVE.add(container.id, container.name, client)
        container.start()
        status = container.wait(timeout=timeout)
        code = status.get("StatusCode")
        out = container.logs(stdout=True, stderr=False).decode("utf-8", errors="replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", errors="replace")
        if code != 0:
            detail = f"nvidia-smi exited with {code} in the container: {last_lines(err or out)[:300]}"
            fix = "the driver or the toolkit on the host is broken: run `nvidia-smi` on the host; " + NVIDIA_TOOLKIT_FIX
        else:
            gpus = parse_nvidia_smi_csv(out)
            if not gpus:
                detail, fix = "nvidia-smi listed no GPU", "check the GPUs and driver on the host (`nvidia-smi`)"
            else:
                return Check(name, OK, describe_gpus(gpus) + " (nvidia-smi in a throwaway container)")
    except ValueError as exc:  # nvidia-smi answered something else
        detail, fix = f"nvidia-smi's answer did not parse: {exc}", "run `nvidia-smi` on the host and check it"
    except docker.errors.DockerException as exc:
        text = engine_error(exc)
        detail = f"the container did not run: {text}"
        if "could not select device driver" in text:
            fix = NVIDIA_TOOLKIT_FIX
        elif "executable file not found" in text or "no such file" in text.lower():
            fix = "the image has no nvidia-smi and the NVIDIA runtime did not inject one: " + NVIDIA_TOOLKIT_FIX
        else:
            fix = "run `docker run --rm --gpus all --entrypoint nvidia-smi IMAGE` by hand and read its error"
    except Exception as exc:  # noqa: BLE001 - a timeout reads as requests' ConnectionError
        detail = f"nvidia-smi did not answer within {timeout:.0f}s ({type(exc).__name__}: {str(exc)[:200]})"
        fix = "run `nvidia-smi` on the host: a hung driver needs a reboot or `nvidia-smi -r`"
    finally:
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                detail += f"; the doctor's container {container.name} could not be removed ({engine_error(exc)})"
            finally:
                LIVE.discard(container.id)
    return Check(name, FAIL, detail, fix)


def runtime_by_container(runtime: Check, gpus: Check) -> tuple[Check, Check]:
    """No NVIDIA runtime listed, yet Docker gives `--gpus` wherever the NVIDIA hook is
    installed: the container decides (ran: both pass; refused: the runtime line fails)."""
    if gpus.status == OK:
        detail = (
            "no NVIDIA runtime or CDI GPU devices listed by `docker info`, but `--gpus all` works "
            "(the engine found the NVIDIA container hook)"
        )
        return Check(runtime.name, OK, detail), gpus
    if "could not select device driver" in gpus.detail:
        return runtime, Check(gpus.name, SKIP, "not run: the engine refused the container its GPUs (see above)")
    return runtime, gpus


def check_publish(host: str, environ: Mapping[str, str]) -> Check:
    """The address containers publish their port on binds (a free port on it)."""
    from pytest_llmperf.servers.docker import endpoint_host, engine_host

    name = "publish address"
    try:
        endpoint_host(environ.get("DOCKER_HOST"), host)
    except ValueError as exc:
        return Check(name, FAIL, str(exc), "publish on the engine host's own address or 0.0.0.0")
    if engine_host(environ.get("DOCKER_HOST")) is not None:
        return Check(name, SKIP, f"{host} is an address on the remote engine's host: not checked from here")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
    except OSError as exc:
        return Check(
            name,
            FAIL,
            f"cannot bind {host}: {exc.strerror or exc}",
            "publish on an address this machine has (127.0.0.1, or one `ip addr` lists)",
        )
    return Check(name, OK, f"{host} binds (a free port, e.g. {port}, is where a server's 8000/tcp is published)")
