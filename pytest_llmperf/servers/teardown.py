"""Removing the containers this process runs on every way out: at the end of their run,
on SIGTERM (then whatever handled SIGTERM before runs) and at interpreter exit."""

from __future__ import annotations

import atexit
import math
import os
import signal
import threading
from collections.abc import Callable
from typing import Any


class LiveContainers:
    """Containers this process runs. While any runs, SIGTERM removes them first and then
    does what the previous handler would; at interpreter exit any left are removed."""

    def __init__(self) -> None:
        # Reentrant: the SIGTERM handler runs on the main thread, maybe inside add/discard.
        self._lock = threading.RLock()
        self._live: dict[str, tuple[str, Any]] = {}
        self._previous: Any = None
        self._installed = False
        self._atexit = False

    def add(self, container_id: str, name: str, client: Any) -> None:
        with self._lock:
            self._live[container_id] = (name, client)
            if not self._atexit:
                atexit.register(self.remove_all)
                self._atexit = True
            if not self._installed and threading.current_thread() is threading.main_thread():
                previous = signal.signal(signal.SIGTERM, self.on_sigterm)
                # None: a handler set outside Python; the closest restorable one is the default.
                self._previous = signal.SIG_DFL if previous is None else previous
                self._installed = True

    def discard(self, container_id: str) -> None:
        with self._lock:
            self._live.pop(container_id, None)
            if not self._live:
                self._restore()

    def names(self) -> list[str]:
        with self._lock:
            return [name for name, _ in self._live.values()]

    def _restore(self) -> None:
        if self._installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False

    def remove_all(self) -> list[str]:
        with self._lock:
            live = dict(self._live)
            self._live.clear()
        removed = []
        for container_id, (name, client) in live.items():
            try:
                client.api.remove_container(container_id, force=True, v=True)
                removed.append(name)
            except Exception:  # noqa: BLE001 - already gone, or the engine is gone
                pass
        return removed

    def on_sigterm(self, signum: int, frame: Any) -> None:
        self.remove_all()
        previous = self._previous
        with self._lock:
            self._restore()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            # The default action: die of SIGTERM, now that nothing of ours is left running.
            os.kill(os.getpid(), signum)


LIVE = LiveContainers()


# What the SDK raises when the engine's host is gone: requests' errors (not DockerException) and the socket's.
ENGINE_GONE: tuple[type[BaseException], ...] = (OSError,)
try:
    import requests.exceptions

    ENGINE_GONE = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, OSError)
except ImportError:  # pragma: no cover - the docker SDK depends on requests
    pass


def removal_in_progress(exc: Exception) -> bool:
    """409 from `remove`: someone else is removing it already (the container is going)."""
    return getattr(exc, "status_code", None) == 409 and "already in progress" in str(exc)


def remove_container(container: Any, stop_timeout: float = 10.0, say: Callable[[str], None] | None = None) -> None:
    """Stop and remove a container of this process. One already gone, or going, is fine; an
    engine that no longer answers is said through `say`, not raised, so the suite goes on."""
    import docker.errors

    try:
        try:
            # The Engine API takes whole seconds and refuses "t=10.0": stopped on a float, the
            # container would get remove(force)'s SIGKILL without its graceful stop.
            container.stop(timeout=math.ceil(stop_timeout))
        except docker.errors.APIError:
            pass  # already stopped or gone; remove(force) below settles it
        container.remove(force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if not removal_in_progress(exc):
            raise
    except ENGINE_GONE as exc:  # the engine's host went away (a remote DOCKER_HOST)
        if say is not None:
            say(
                f"llmperf: could not remove container {container.name}: its Docker engine does not answer "
                f"({type(exc).__name__}); once that host is back, pytest --llmperf-cleanup there removes it"
            )
    finally:
        LIVE.discard(container.id)
