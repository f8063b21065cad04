"""Run the simulator in a thread of this process or as a child process, on a free port,
stopped when the block exits however it exits; `simulated_process` yields the child
itself (URL, exit code, last output lines)."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import uvicorn

from pytest_llmperf.sim.app import build_app
from pytest_llmperf.sim.config import SimConfig
from pytest_llmperf.sim.generation import StreamReset

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 5.0


class SimServer(uvicorn.Server):
    """uvicorn.Server that stops on SIGINT/SIGTERM with a clean exit (stock uvicorn re-raises)."""

    exit_code = 0
    # Stop once this pid is no longer the parent (it died without stopping us); checked on
    # uvicorn's tick, since a watchdog thread would take the GIL from the engine loop.
    parent_pid: int | None = None

    async def on_tick(self, counter: int) -> bool:
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            self.should_exit = True
        return await super().on_tick(counter)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, frame: object) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True


def bind_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"sim: cannot listen on {host}:{port}: {exc}") from exc
    sock.listen(2048)
    return sock


def _not_a_deliberate_reset(record: logging.LogRecord) -> bool:
    """Not a StreamReset: a connection the simulator drops on purpose needs no traceback."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, StreamReset)


def make_server(config: SimConfig, log_level: str = "warning") -> tuple[SimServer, socket.socket]:
    if _not_a_deliberate_reset not in logging.getLogger("uvicorn.error").filters:
        logging.getLogger("uvicorn.error").addFilter(_not_a_deliberate_reset)
    app = build_app(config)
    sock = bind_socket(config.host, config.port)
    uv = uvicorn.Config(
        app, log_level=log_level, access_log=False, timeout_graceful_shutdown=2, lifespan="on", backlog=2048
    )
    server = SimServer(uv)
    service = app.state.service
    if config.crash_exit:

        def exit_on_death() -> None:
            server.exit_code = 1
            server.should_exit = True

        service.on_dead = exit_on_death
    return server, sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.contextmanager
def _thread_server(config: SimConfig) -> Iterator[str]:
    server, sock = make_server(config)
    url = base_url(sock)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced to the caller below
            errors.append(exc)

    thread = threading.Thread(target=run, name=f"sim-server-{url}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if errors or not thread.is_alive():
                raise RuntimeError(f"simulated server failed to start: {errors[0] if errors else 'thread exited'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"simulated server did not start within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=STOP_GRACE_S + 5)
        sock.close()
        if thread.is_alive():
            raise RuntimeError("simulated server thread did not stop")


PARENT_PID_ENV = "LLMPERF_SIM_PARENT_PID"


class SimProcess:
    """A simulator child process (`simulated_process`): its URL, and what a caller needs to
    tell whether it still runs and what it said last."""

    def __init__(self, url: str, process: subprocess.Popen[str], output: collections.deque[str]) -> None:
        self.url = url
        self.process = process
        self._output = output  # its last lines (stdout and stderr), appended by a reader thread

    @property
    def returncode(self) -> int | None:
        """None while it runs; its exit code once it ended."""
        return self.process.poll()

    def output_tail(self, lines: int) -> list[str]:
        """Its last `lines` lines of output (at most OUTPUT_LINES are kept)."""
        return list(self._output)[-lines:] if lines > 0 else []


OUTPUT_LINES = 50


@contextlib.contextmanager
def simulated_process(config: SimConfig) -> Iterator[SimProcess]:
    """`python -m pytest_llmperf.sim` as a child process, yielded once it listens;
    terminated (SIGTERM, then SIGKILL after a grace period) when the block exits."""
    argv = [sys.executable, "-m", "pytest_llmperf.sim", *config.to_vllm_argv()]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        bufsize=1,
        # The child exits if this process dies without stopping it (SIGTERM, kill -9).
        env={**os.environ, "PYTHONUNBUFFERED": "1", PARENT_PID_ENV: str(os.getpid())},
    )
    tail: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES)
    url_box: list[str] = []
    ready = threading.Event()

    def drain() -> None:  # keep reading so the child never blocks on a full pipe
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            if not url_box and "http://" in line:
                url_box.append(line[line.index("http://") :].split()[0])
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, name="sim-process-reader", daemon=True)
    reader.start()
    try:
        if not ready.wait(START_TIMEOUT_S) or not url_box:
            code = proc.poll()
            raise RuntimeError(
                f"simulated server process did not report its URL (exit code {code}); output:\n" + "\n".join(tail)
            )
        yield SimProcess(url_box[0], proc, tail)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


@contextlib.contextmanager
def simulated_server(config: SimConfig | None = None, mode: str = "thread") -> Iterator[str]:
    """Run a simulated vLLM server, yielding its base URL: in a daemon thread of this
    process (mode="thread": cheap, shares the GIL) or as a child process ("process")."""
    config = config or SimConfig()
    if mode == "thread":
        with _thread_server(config) as url:
            yield url
    elif mode == "process":
        with simulated_process(config) as process:
            yield process.url
    else:
        raise ValueError(f"simulated_server mode must be 'thread' or 'process', got {mode!r}")
