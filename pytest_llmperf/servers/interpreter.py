"""The interpreter a local vLLM runs from: found (a path, or a command on PATH), and shown
to import vllm by a probe that also reads its version and platform; once per process."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ENV = {"VLLM_NO_USAGE_STATS": "1", "VLLM_DO_NOT_TRACK": "1"}  # no telemetry, for every vLLM process
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
