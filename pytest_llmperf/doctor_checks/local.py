"""vLLM as a local process: its interpreter and `import vllm`, CUDA_VISIBLE_DEVICES, and
this machine's GPUs from its own nvidia-smi."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence

from pytest_llmperf.doctor_checks.check import FAIL, OK, Check, last_lines
from pytest_llmperf.doctor_checks.docker import describe_gpus
from pytest_llmperf.servers.gpu_info import NVIDIA_SMI_QUERY, parse_nvidia_smi_csv

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
                    f"failed in {found}: {last_lines(done.stderr or done.stdout, 1)[:300]}",
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
        return Check(
            name, FAIL, f"nvidia-smi exited with {done.returncode}: {last_lines(done.stderr or done.stdout)}", fix
        )
    try:
        gpus = parse_nvidia_smi_csv(done.stdout)
    except ValueError as exc:
        return Check(name, FAIL, f"nvidia-smi's answer did not parse: {exc}", "run `nvidia-smi` by hand")
    if not gpus:
        return Check(name, FAIL, "nvidia-smi listed no GPU", "check the GPUs and driver (`nvidia-smi`)")
    return Check(name, OK, describe_gpus(gpus))
