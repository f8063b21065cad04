"""SIGTERM (issue 14, point 7): a session told to stop winds down as on Ctrl-C. The run in
progress is kept as a partial result in the terminal summary and the --llmperf-report,
the simulator is stopped (not orphaned), and pytest exits with code 2.

pytest runs as a real subprocess of the project's folder: the signal must reach a
process of its own, with its own handlers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import pytest_llmperf
from tests.reliability.conftest import TAG_VAR, tagged_processes

ROOT = Path(pytest_llmperf.__file__).resolve().parent.parent

LONG = """
import pytest
from conftest import BASE

# At simulator speed 1 each request streams 256 tokens for seconds: still running when
# signalled. No warm-up: the measured window opens at once.
@pytest.mark.llmperf(server=BASE, num_prompts=40, max_tokens=256, warmup=0)
def test_long(llmperf):
    llmperf.run(concurrency=4).assert_no_regression("decode_tok_s")
"""


class Session:
    """`pytest --llmperf-sim ...` in the project's folder, its output read as it comes."""

    def __init__(self, folder: Path, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:benchmark", "-p", "no:cacheprovider", "--llmperf-sim", *args],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"never printed {text!r}:\n" + self.output)
            time.sleep(0.05)

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("pytest did not stop within a minute of SIGTERM:\n" + self.output) from None
        self._reader.join(timeout=10)
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def simulators() -> dict[int, str]:
    """The simulator processes this suite started and that still run."""
    tag = os.environ[TAG_VAR]
    return {pid: cmd for pid, cmd in tagged_processes(tag).items() if "pytest_llmperf.sim" in cmd}


def test_sigterm_mid_run_writes_the_partial_run_to_the_report_and_stops_the_simulator(project):
    project.makepyfile(test_suite=LONG)
    report = project.path / "report.json"
    session = Session(project.path, "-v", "-o", "llmperf_sim_speed=1", "--llmperf-report", str(report))
    session.wait_for("[llmperf] tiny @ concurrency 4: 40 prompts")  # -v: each run's own lines
    time.sleep(1.0)  # the measured window is open: requests stream
    code = session.terminate()
    left = simulators()  # right away: stopped by the session, not by its orphan watchdog

    assert code == pytest.ExitCode.INTERRUPTED, session.output
    out = session.output
    assert "KeyboardInterrupt: interrupted by SIGTERM during tiny @ concurrency 4" in out
    assert "[llmperf] stopping server tiny" in out
    summary = out[out.index("llmperf summary") :]
    assert "(interrupted)" in summary and f"full report: {report}" in summary
    document = json.loads(report.read_text())
    (run,) = document["runs"]
    assert run["stop_reasons"] == ["interrupted"] and 0 < run["attempted"] < 40
    errors = {r["error"] for result in run["results"] for r in result["records"] if r["error"]}
    assert errors == {"interrupted (SIGTERM)"}
    assert not left, f"simulator left running after SIGTERM: {left}"


def test_sigterm_while_the_server_starts_still_writes_the_report(project):
    project.makepyfile(test_suite=LONG)
    report = project.path / "report.json"
    session = Session(project.path, "--llmperf-sim-args=--sim-slow-start-seconds 60", "--llmperf-report", str(report))
    session.wait_for("[llmperf] starting server tiny (sim)")
    time.sleep(1.0)  # waiting for /health, outside any run
    code = session.terminate()
    left = simulators()

    assert code == pytest.ExitCode.INTERRUPTED, session.output
    assert "KeyboardInterrupt: stopped by SIGTERM" in session.output
    assert "no workload ran" in session.output
    document = json.loads(report.read_text())
    assert document["runs"] == [] and document["target"] == "sim"
    assert not left, f"simulator left running after SIGTERM: {left}"
