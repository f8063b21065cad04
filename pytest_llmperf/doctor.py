"""`llmperf doctor` and `--llmperf-doctor`: check a box for a target before the first long
run, one line per check (passed, failed with its fix, warning, or not tried). Fast (no
model load) and safe on a shared box: its one container runs `nvidia-smi`, labelled as
no GPU server (so a running suite ignores it), and is removed on every way out.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.kinds import kind
from pytest_llmperf.options import LlmperfOptions
from pytest_llmperf.servers.gpu_info import NVIDIA_SMI_QUERY, GpuInfo, parse_nvidia_smi_csv
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.http import url_argument
from pytest_llmperf.util.secrets import redact

OK, FAIL, WARN, SKIP = "ok", "fail", "warn", "skip"
MARKS = {OK: "✓", FAIL: "✗", WARN: "!", SKIP: "-"}
ASCII_MARKS = {OK: "PASS", FAIL: "FAIL", WARN: "WARN", SKIP: "SKIP"}

# The image a ServerSpec runs when it names none: the plugin's default vLLM image.
DEFAULT_IMAGE = str(ServerSpec.__dataclass_fields__["image"].default)
DEFAULT_HF_CACHE = "~/.cache/huggingface"
DOCTOR_SPEC = ServerSpec(name="llmperf-doctor", model="nvidia-smi")  # its container's labels
NVIDIA_TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit on the engine's host, then "
    "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` "
    "(or generate CDI specs: `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"
)
GIB = 1024**3


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK, FAIL, WARN or SKIP
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True)
class DoctorConfig:
    """What to check; `target` names the check set (CHECK_SETS)."""

    target: str = "gpu"
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

    def __post_init__(self) -> None:
        if self.target not in CHECK_SETS:
            raise ValueError(f"doctor target must be one of {', '.join(CHECK_SETS)}, got {self.target!r}")


# --------------------------------------------------------------------------- output


def use_ascii(stream: Any = None) -> bool:
    """PASS/FAIL instead of ✓/✗ where the stream cannot encode them."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def format_checks(checks: Sequence[Check], *, ascii_marks: bool = False) -> list[str]:
    marks = ASCII_MARKS if ascii_marks else MARKS
    lines = []
    for check in checks:
        lines.append(f"{marks[check.status]} {check.name}: {check.detail}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"    fix: {check.fix}")
    return lines


def summary_line(checks: Sequence[Check]) -> str:
    failed = sum(c.failed for c in checks)
    warned = sum(c.status == WARN for c in checks)
    tail = f", {warned} warning(s)" if warned else ""
    if failed:
        return f"{failed} of {len(checks)} checks failed{tail}"
    return f"all {sum(c.status == OK for c in checks)} checks passed{tail}"


def failed(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.failed]


# --------------------------------------------------------------------------- Docker


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


def _lines(text: str, limit: int = 3) -> str:
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(kept[-limit:])


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
            detail = f"nvidia-smi exited with {code} in the container: {_lines(err or out)[:300]}"
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


# --------------------------------------------------------------------------- cache, tokens, port


def model_cache_dir(hf_cache: Path, model: str) -> Path:
    """Where the hub keeps a model under the HF home: hub/models--Org--Name."""
    return hf_cache / "hub" / ("models--" + model.replace("/", "--"))


def cached_model_size(hf_cache: Path, model: str) -> tuple[int, int, int] | None:
    """(bytes, snapshots, dangling links) of a model in the cache (each blob once); None when not cached."""
    snapshots = model_cache_dir(hf_cache, model) / "snapshots"
    if not snapshots.is_dir():
        return None
    seen: set[str] = set()
    total = dangling = 0
    revisions = [p for p in snapshots.iterdir() if p.is_dir()]
    for revision in revisions:
        for path in revision.rglob("*"):
            try:
                real = os.path.realpath(path)
                if real in seen or not os.path.isfile(real):
                    dangling += not os.path.exists(real)
                    continue
                seen.add(real)
                total += os.path.getsize(real)
            except OSError:
                dangling += 1
    if not revisions:
        return None
    return total, len(revisions), dangling


def check_hf_cache(
    hf_cache: str,
    models: Sequence[str],
    environ: Mapping[str, str],
    *,
    remote_engine: bool = False,
    local: bool = False,
) -> list[Check]:
    """The cache folder: present (missing is a warning for `local`), writable (really
    written: as root the mode bits say nothing), its free space; each model's size."""
    from pytest_llmperf.servers.docker import engine_host

    name = "Hugging Face cache"
    if remote_engine:
        host = engine_host(environ.get("DOCKER_HOST"))
        return [Check(name, SKIP, f"{hf_cache} is a path on {host} (DOCKER_HOST): not checked from here")]
    path = Path(hf_cache).expanduser()
    if not path.exists():
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            detail = f"{path} cannot exist: {parent} is a file"
            fix = "give a folder with --hf-cache / --llmperf-hf-cache"
        elif local:
            detail = f"{path} does not exist yet: vLLM creates it at its first download"
            return [Check(name, WARN, detail, f"`mkdir -p {path}` and download the models first")]
        else:
            detail = f"{path} does not exist (Docker would create it owned by root)"
            fix = f"`mkdir -p {path}`, or give another folder with --hf-cache / --llmperf-hf-cache"
        return [Check(name, FAIL, detail, fix)]
    if not path.is_dir():
        return [Check(name, FAIL, f"{path} is not a folder", "give a folder with --hf-cache / --llmperf-hf-cache")]
    try:  # really write: as root, permission bits say nothing (a read-only mount still refuses)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".llmperf-doctor-"):
            pass
    except OSError as exc:
        return [
            Check(
                name,
                FAIL,
                f"{path} is not writable: {exc.strerror or exc}",
                f"make it writable for the server (`chown -R $USER {path}`, or remount it read-write), or give "
                "another folder with --hf-cache / --llmperf-hf-cache",
            )
        ]
    free = shutil.disk_usage(path).free
    checks = [Check(name, OK, f"{path} exists and is writable; {free / GIB:.1f} GiB free")]
    for model in models:
        checks.append(_model_check(path, model, free))
    return checks


def _model_check(path: Path, model: str, free: int) -> Check:
    name = f"model {model}"
    found = cached_model_size(path, model)
    if found is None:
        return Check(
            name,
            WARN,
            f"not in the cache: the first server start downloads it (size unknown here; {free / GIB:.1f} GiB free)",
            f"download it first (`huggingface-cli download {model} --cache-dir {path / 'hub'}`) so a run "
            "does not wait on it, and check its size on the hub against the free space",
        )
    size, revisions, dangling = found
    detail = f"cached: {size / GIB:.1f} GiB in {revisions} snapshot(s); {free / GIB:.1f} GiB free"
    if dangling:
        return Check(
            name,
            FAIL,
            f"{detail}; {dangling} snapshot file(s) point at missing blobs (an interrupted download)",
            f"finish the download (`huggingface-cli download {model}`) or delete {model_cache_dir(path, model)}",
        )
    if free < size:
        return Check(
            name,
            WARN,
            f"{detail}: less free space than the model's size, so a new revision could not be downloaded",
            f"free disk space on {path}'s filesystem, or give a larger folder with --llmperf-hf-cache",
        )
    return Check(name, OK, detail)


def check_tokens(names: Sequence[str], environ: Mapping[str, str]) -> list[Check]:
    checks = []
    for token in names:
        if environ.get(token):
            checks.append(Check(token, OK, "set (passed to the server by name, shown as ***)"))
        else:
            checks.append(
                Check(
                    token,
                    FAIL,
                    "not set, but a server passes it through from this environment (gated models need it)",
                    f"`export {token}=hf_...` (a read token from https://huggingface.co/settings/tokens)",
                )
            )
    return checks


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


# --------------------------------------------------------------------------- local process


Runner = Callable[[Sequence[str], float, Mapping[str, str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=dict(env), check=False)


def check_local_vllm(
    python: str | None, environ: Mapping[str, str], *, timeout: float = 60.0, run: Runner = _run
) -> list[Check]:
    """The interpreter (default: python3 on PATH), `import vllm` and CUDA_VISIBLE_DEVICES."""
    given = python or "python3"
    found = shutil.which(given, path=environ.get("PATH")) if os.sep not in given else given
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        where = "not on PATH" if os.sep not in given else "not an executable file"
        return [
            Check(
                "interpreter",
                FAIL,
                f"{given}: {where}",
                "give the Python of the environment vLLM is installed in (e.g. --local ~/venvs/vllm/bin/python)",
            )
        ]
    checks = [Check("interpreter", OK, found)]
    code = "import vllm; print(vllm.__version__)"
    try:
        done = run([found, "-c", code], timeout, environ)
    except subprocess.TimeoutExpired:
        checks.append(
            Check(
                "import vllm",
                FAIL,
                f"`{found} -c 'import vllm'` did not finish within {timeout:.0f}s",
                "run it by hand to see where it hangs (a slow file system, a CUDA init)",
            )
        )
    except OSError as exc:
        checks.append(Check("import vllm", FAIL, f"{found} did not run: {exc}", "give a working interpreter"))
    else:
        if done.returncode != 0:
            checks.append(
                Check(
                    "import vllm",
                    FAIL,
                    f"failed in {found}: {_lines(done.stderr or done.stdout, 1)[:300]}",
                    f"`{found} -m pip install vllm` (or give the interpreter of vLLM's environment)",
                )
            )
        else:
            version = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "?"
            checks.append(Check("import vllm", OK, f"vLLM {version}"))
    checks.append(cuda_visible_devices_check(environ))
    return checks


def cuda_visible_devices_check(environ: Mapping[str, str]) -> Check:
    name = "CUDA_VISIBLE_DEVICES"
    value = environ.get(name)
    if value is None:
        return Check(name, OK, "unset: vLLM sees every GPU of this machine")
    if not value.strip() or value.strip() in ("-1", "none", "NoDevFiles"):
        return Check(
            name,
            FAIL,
            f"{value!r}: hides every GPU from vLLM",
            "`unset CUDA_VISIBLE_DEVICES`, or name the GPUs to use (e.g. CUDA_VISIBLE_DEVICES=0,1)",
        )
    return Check(name, OK, f"{value} (vLLM sees only these GPUs)")


def check_host_gpus(environ: Mapping[str, str], *, timeout: float = 30.0, run: Runner = _run) -> Check:
    """This machine's GPUs, from its own nvidia-smi (a local vLLM process uses them)."""
    name = "GPUs on this machine"
    fix = "install the NVIDIA driver (nvidia-smi comes with it); on a CPU build pass --no-gpu"
    exe = shutil.which(NVIDIA_SMI_QUERY[0], path=environ.get("PATH"))
    if exe is None:
        return Check(name, FAIL, "no nvidia-smi on PATH: no NVIDIA driver here", fix)
    try:
        done = run([exe, *NVIDIA_SMI_QUERY[1:]], timeout, environ)
    except (subprocess.TimeoutExpired, OSError) as exc:
        return Check(name, FAIL, f"nvidia-smi did not answer: {type(exc).__name__}", "run `nvidia-smi` by hand")
    if done.returncode != 0:
        return Check(name, FAIL, f"nvidia-smi exited with {done.returncode}: {_lines(done.stderr or done.stdout)}", fix)
    try:
        gpus = parse_nvidia_smi_csv(done.stdout)
    except ValueError as exc:
        return Check(name, FAIL, f"nvidia-smi's answer did not parse: {exc}", "run `nvidia-smi` by hand")
    if not gpus:
        return Check(name, FAIL, "nvidia-smi listed no GPU", "check the GPUs and driver (`nvidia-smi`)")
    return Check(name, OK, describe_gpus(gpus))


def check_external(base_url: str, timeout: float) -> Check:
    from pytest_llmperf.util.http import PageError, fetch_version

    try:
        version = fetch_version(base_url, timeout=timeout)
    except PageError as exc:
        return Check("server", FAIL, f"{base_url} does not answer /version: {exc}", "start the server, or fix the URL")
    return Check("server", OK, f"{base_url} answers: vLLM {version}")


# --------------------------------------------------------------------------- the checklist


def run_doctor(config: DoctorConfig) -> list[Check]:
    """Every check of `config.target`'s check set, in order; never raises for a failed check."""
    secrets = [config.environ[n] for n in config.tokens if config.environ.get(n)]
    return _redacted(CHECK_SETS[config.target].run(config), secrets)


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
                checks[runtime_at], gpus = _runtime_by_container(checks[runtime_at], gpus)
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


@dataclass(frozen=True)
class CheckSet:
    """A target's doctor checks, and what `llmperf doctor`'s header calls them and names."""

    words: str
    run: Callable[[DoctorConfig], list[Check]]
    subject: Callable[[DoctorConfig], str]


def _images(config: DoctorConfig) -> str:
    return ", ".join(config.images)


CHECK_SETS = {
    "gpu": CheckSet("vLLM containers on GPUs", lambda c: _container_checks(c, gpu=True), _images),
    "docker": CheckSet("containers without GPUs", lambda c: _container_checks(c, gpu=False), _images),
    "local": CheckSet("vLLM as a local process", _local_checks, lambda c: c.python or "python3"),
    "external": CheckSet("an external server", _external_checks, lambda c: c.base_url or ""),
    "sim": CheckSet("the simulated server", _sim_checks, _images),
    "none": CheckSet("a target kind without doctor checks", _no_checks, lambda c: ""),
}


def _runtime_by_container(runtime: Check, gpus: Check) -> tuple[Check, Check]:
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


def _redacted(checks: Sequence[Check], secrets: Sequence[str]) -> list[Check]:
    """No token value in any line (an error message could echo the environment)."""
    if not secrets:
        return list(checks)
    return [Check(c.name, c.status, redact(c.detail, secrets), redact(c.fix, secrets)) for c in checks]


# --------------------------------------------------------------------------- the plugin's view


def prepared_python() -> str:
    """The prepared vLLM CPU build's interpreter, prepared yet or not (then its check fails)."""
    from pytest_llmperf.servers.local_vllm import PREPARED_KEY
    from pytest_llmperf.util.files import cache_root

    return str(cache_root() / PREPARED_KEY / "venv" / "bin" / "python")


def passed_tokens(specs: Iterable[ServerSpec]) -> tuple[str, ...]:
    """The variables the servers pass through from this environment (env value None)."""
    names: list[str] = []
    for spec in specs:
        for name, value in spec.env.items():
            if value is None and name not in names:
                names.append(name)
    return tuple(names)


def config_from_options(
    options: LlmperfOptions, specs: Sequence[ServerSpec], environ: Mapping[str, str] | None = None
) -> DoctorConfig:
    """--llmperf-doctor: the checks of the session's target for the servers it will run."""
    chosen = options.target_kind or kind("sim")
    python, local_gpu = None, False
    if chosen.local_python is not None:
        python, local_gpu = chosen.local_python(options), True
        if python is None:  # the prepared CPU build
            python, local_gpu = prepared_python(), False
        else:
            from pytest_llmperf.servers.local_vllm import InterpreterError, check_interpreter

            try:  # a CPU build of vLLM needs no GPU line; a broken interpreter fails its own line
                local_gpu = check_interpreter(python).platform != "cpu"
            except InterpreterError:
                pass
    images = tuple(dict.fromkeys(options.image or spec.image for spec in specs)) or (options.image or DEFAULT_IMAGE,)
    return DoctorConfig(
        target=chosen.doctor,
        images=images,
        models=tuple(dict.fromkeys(spec.model for spec in specs)),
        hf_cache=options.hf_cache if chosen.containers else None,
        tokens=passed_tokens(specs),
        python=python,
        local_gpu=local_gpu,
        base_url=options.base_url,
        timeout=30.0,
        environ=dict(os.environ if environ is None else environ),
        publish_host=options.publish_host,
    )


def usage_error_text(checks: Sequence[Check], flag: str = "--llmperf-doctor") -> str:
    """The message a failed --llmperf-doctor stops the session with: the failed lines and their fixes."""
    bad = failed(checks)
    lines = format_checks(bad, ascii_marks=use_ascii())
    return f"{flag}: {len(bad)} check(s) failed, the suite did not start:\n" + "\n".join(f"  {ln}" for ln in lines)


# --------------------------------------------------------------------------- the command


def add_arguments(parser: Any) -> None:
    """`llmperf doctor`'s arguments (an argparse parser)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--gpu", dest="target", action="store_const", const="gpu", help="vLLM containers on GPUs (the default)"
    )
    where.add_argument("--docker", dest="target", action="store_const", const="docker", help="containers without GPUs")
    where.add_argument(
        "--local",
        dest="python",
        nargs="?",
        const="python3",
        default=None,
        metavar="PYTHON",
        help="vLLM as a local process from this interpreter (default: python3 on PATH)",
    )
    where.add_argument("--base-url", type=url_argument, default=None, metavar="URL", help="a server someone else runs")
    where.add_argument(
        "--real-cpu",
        dest="target",
        action="store_const",
        const="real-cpu",
        help="the vLLM CPU build scripts/real_vllm_cpu.sh prepared (as --llmperf-real-cpu)",
    )
    parser.set_defaults(target=None)
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the vLLM image (default {DEFAULT_IMAGE})")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="a model the servers load (repeatable): its size in the cache against the free space",
    )
    parser.add_argument(
        "--hf-cache",
        default=None,
        help=f"the Hugging Face cache folder (default {DEFAULT_HF_CACHE}, as --llmperf-hf-cache; "
        "local: $HF_HOME when set)",
    )
    parser.add_argument(
        "--token",
        action="append",
        default=None,
        metavar="NAME",
        help="a variable the servers pass through from here (repeatable; default HF_TOKEN)",
    )
    parser.add_argument("--no-token", action="store_true", help="the servers pass no token (public models)")
    parser.add_argument("--publish-host", default="127.0.0.1", help="where containers publish their port")
    parser.add_argument(
        "--pull", action="store_true", help="pull a missing image (default: only ask the registry whether it has it)"
    )
    parser.add_argument("--no-gpu", action="store_true", help="--local: a CPU build, no GPU check")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for each slow step (default 60)")
    parser.add_argument("--ascii", action="store_true", help="PASS/FAIL instead of the check marks")


def config_from_args(args: Any, environ: Mapping[str, str] | None = None) -> DoctorConfig:
    env = dict(os.environ if environ is None else environ)
    chosen = kind(args.target or "gpu")  # --gpu, --docker, --real-cpu: a target kind's name
    python, local_gpu = args.python, not args.no_gpu
    if chosen.runs_local_vllm:  # --real-cpu: the prepared CPU build
        python, local_gpu = prepared_python(), False
    # A local vLLM (--local, --real-cpu), a server someone else runs (--base-url), or the kind's own checks.
    target = "local" if python is not None else "external" if args.base_url is not None else chosen.doctor
    hf_cache = args.hf_cache or (env.get("HF_HOME") if python is not None else None) or DEFAULT_HF_CACHE
    tokens: tuple[str, ...] = () if args.no_token else tuple(args.token or ("HF_TOKEN",))
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0 seconds, got {args.timeout}")
    return DoctorConfig(
        target=target,
        images=(args.image,),
        models=tuple(args.model),
        hf_cache=hf_cache,
        tokens=tokens,
        publish_host=args.publish_host,
        python=python,
        local_gpu=local_gpu,
        base_url=args.base_url,
        pull=args.pull,
        timeout=args.timeout,
        environ=env,
    )


def cmd_doctor(args: Any) -> int:
    """`llmperf doctor`: print the checklist; exit 1 when a check failed."""
    config = config_from_args(args)
    checks_of = CHECK_SETS[config.target]
    print(f"llmperf doctor: {checks_of.words} ({checks_of.subject(config)})", flush=True)
    checks = run_doctor(config)
    for line in format_checks(checks, ascii_marks=args.ascii or use_ascii()):
        print(f"  {line}")
    print(summary_line(checks))
    return 1 if failed(checks) else 0
