"""SIGTERM as Ctrl-C: `TERMINATE.install()` makes SIGTERM raise KeyboardInterrupt on the
main thread, so a session told to stop winds down as on Ctrl-C, report written. `defer()`
counts a later SIGTERM instead, so it cannot cut the wind-down. Handlers installed on top
(servers/docker.py) call this one when done.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

STOPPED_BY_SIGTERM = "stopped by SIGTERM"


class _SigtermAsInterrupt:
    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False
        self._deferred = False
        self.received = 0  # SIGTERMs seen since install(), until restore()

    @property
    def installed(self) -> bool:
        return self._installed

    @property
    def active(self) -> bool:
        """Whether a SIGTERM now raises KeyboardInterrupt (installed, not deferred)."""
        return self._installed and not self._deferred

    def install(self) -> bool:
        """SIGTERM raises KeyboardInterrupt from now on; False (nothing changed) off the
        main thread, where Python cannot set signal handlers."""
        if self._installed:
            return True
        if threading.current_thread() is not threading.main_thread():
            return False
        previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        # None: a handler set outside Python; the closest restorable one is the default.
        self._previous = signal.SIG_DFL if previous is None else previous
        self._installed, self._deferred, self.received = True, False, 0
        return True

    def note(self) -> None:
        """Count a SIGTERM another handler took on our behalf (the runner's event loop)."""
        self.received += 1

    def defer(self) -> None:
        """From now on a SIGTERM is counted, not raised (the session is finishing)."""
        self._deferred = True

    def restore(self) -> None:
        """Put back the handler install() found, unless one installed on top is in place (it
        calls ours, which then does what the previous handler would)."""
        if not self._installed:
            return
        self._installed, self._deferred, self.received = False, False, 0
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == (
            self._on_sigterm
        ):
            signal.signal(signal.SIGTERM, self._previous)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if not self._installed:  # restored while a later handler still chained to us
            previous = self._previous
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGTERM)
            return
        self.received += 1
        if not self._deferred:
            raise KeyboardInterrupt(STOPPED_BY_SIGTERM)


TERMINATE = _SigtermAsInterrupt()
