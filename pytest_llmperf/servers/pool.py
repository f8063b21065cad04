"""At most one server at a time (on a GPU each vLLM reserves most of the memory): started
when a test first needs it, stopped when another is needed. An endpoint someone else runs
is attached to and left alone."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack

from pytest_llmperf.servers.base import ServerStartError, ServerTarget
from pytest_llmperf.servers.endpoint import Endpoint
from pytest_llmperf.servers.spec import ServerSpec


class ServerPool:
    def __init__(self, target: ServerTarget, log: Callable[[str], None] = lambda msg: None) -> None:
        self.target = target
        self.log = log
        self.starts: list[str] = []  # server names in start order (for reports and tests)
        self.attached: list[str] = []  # the same, for endpoints someone else runs
        self._current: ServerSpec | None = None
        self._endpoint: Endpoint | None = None
        self._stack: ExitStack | None = None
        self._failed: dict[ServerSpec, str] = {}

    def endpoint(self, spec: ServerSpec) -> Endpoint:
        if self._current == spec and self._endpoint is not None:
            return self._endpoint
        if spec in self._failed:
            # Don't spend another half hour loading a model that already failed.
            raise ServerStartError(self._failed[spec])
        self.stop()
        starts = self.target.starts_servers
        if starts:
            self.log(f"starting server {spec.name} ({self.target.name})")
        stack = ExitStack()
        try:
            endpoint = stack.enter_context(self.target.start(spec))
        except BaseException as exc:
            stack.close()
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            failed = "failed to start" if starts else "was not usable"
            self._failed[spec] = f"server {spec.name} {failed} earlier in this session: {why}"
            if isinstance(exc, ServerStartError):  # say which server: a session starts several
                did = "did not start" if starts else "is not usable"
                raise ServerStartError(f"server {spec.name} ({self.target.name}) {did}: {exc}") from None
            raise
        self._current, self._endpoint, self._stack = spec, endpoint, stack
        if starts:
            self.starts.append(spec.name)
        else:
            self.log(f"server {spec.name}: using {endpoint.base_url} ({self.target.name}: run by someone else)")
            self.attached.append(spec.name)
        return endpoint

    def restart(self, spec: ServerSpec) -> Endpoint:
        """A fresh start of `spec`'s server, so what differs between starts is part of a repetition."""
        self.stop()
        return self.endpoint(spec)

    def retire(self, spec: ServerSpec, why: str) -> None:
        """`spec`'s server died: stop what is left of it; later requests for it fail at once."""
        if self._current == spec:
            self.stop()
        self._failed[spec] = f"server {spec.name!r} died earlier in this session ({why}); not started again"

    def stop(self) -> None:
        stack, name = self._stack, self._current.name if self._current else None
        self._current = self._endpoint = self._stack = None
        if stack is not None:
            if self.target.starts_servers:
                self.log(f"stopping server {name}")
            stack.close()
