"""Stand-ins for the local-process target's surroundings: an interpreter that "has vLLM"
(it answers the import probe and serves with the simulator), one that lacks it, and an
`nvidia-smi` first on PATH that logs its arguments and shows the GPUs it was asked for."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# H200s as nvidia-smi's CSV prints them; used memory grows by 1000 MiB on every call.
GPUS = ("NVIDIA H200", "NVIDIA H200", "NVIDIA H200", "NVIDIA H200")


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_python(path: Path, version: str = "0.99.0", platform: str = "cuda") -> Path:
    """An interpreter with "vLLM `version`" for `platform`: the probe's `-c` gets the
    marked line (after a log line, as vLLM prints on import); `-m MODULE --model M ...`
    runs the simulated server on M with the rest of the flags, at real-time speed with
    steps four times the model's (a busy shared host then still keeps its schedule)."""
    return _executable(
        path,
        f"""#!/bin/sh
if [ "$1" = "-c" ]; then
    echo "INFO vllm: automatically detected platform {platform}."
    echo "llmperf-probe {version} {platform}"
    exit 0
fi
shift 3  # -m vllm.entrypoints.openai.api_server --model
model="$1"; shift
PYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} -m pytest_llmperf.sim "$model" "$@" \\
    --sim-step-time-scale 4
""",
    )


def python_without_vllm(path: Path) -> Path:
    return _executable(
        path,
        """#!/bin/sh
echo "Traceback (most recent call last):" >&2
echo "ModuleNotFoundError: No module named 'vllm'" >&2
exit 1
""",
    )


def fake_nvidia_smi(folder: Path) -> Path:
    """`folder`/nvidia-smi: logs its arguments to `folder`/calls, answers the query for
    the GPUs of its --id= (indices; all four without one)."""
    lines = "\\n".join(f"{name}, 570.124.06, $((used + {i})), 143771" for i, name in enumerate(GPUS))
    _executable(
        folder / "nvidia-smi",
        f"""#!/bin/bash
echo "$*" >> "{folder}/calls"
used=$(( $(wc -l < "{folder}/calls") * 1000 ))
all=$(printf "{lines}")
ids=""
for arg in "$@"; do case "$arg" in --id=*) ids="${{arg#--id=}}" ;; esac; done
if [ -z "$ids" ]; then echo "$all"; exit 0; fi
IFS=, read -ra wanted <<< "$ids"
for i in "${{wanted[@]}}"; do
    case "$i" in
        [0-3]) sed -n "$((i + 1))p" <<< "$all" ;;
        *) echo "No devices were found"; exit 6 ;;
    esac
done
""",
    )
    return folder


def smi_calls(folder: Path) -> list[str]:
    calls = folder / "calls"
    return calls.read_text().splitlines() if calls.exists() else []
