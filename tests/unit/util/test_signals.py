"""SIGTERM as Ctrl-C (util/signals.py): installed, deferred, restored, and composed with
the docker target's own SIGTERM handler."""

import signal
import threading

import pytest

from pytest_llmperf.servers.teardown import LiveContainers
from pytest_llmperf.util.signals import STOPPED_BY_SIGTERM, _SigtermAsInterrupt


@pytest.fixture
def previous():
    """A recording handler in place before each test, put back after it."""
    seen: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, old)


def test_sigterm_raises_keyboard_interrupt_until_restored(previous):
    term = _SigtermAsInterrupt()
    before = signal.getsignal(signal.SIGTERM)
    assert term.install() and term.active
    with pytest.raises(KeyboardInterrupt, match=STOPPED_BY_SIGTERM):
        signal.raise_signal(signal.SIGTERM)
    assert term.received == 1
    term.restore()
    assert signal.getsignal(signal.SIGTERM) is before and not term.installed and term.received == 0
    signal.raise_signal(signal.SIGTERM)
    assert previous == [signal.SIGTERM]  # the handler found at install runs again


def test_deferred_sigterm_is_counted_not_raised(previous):
    term = _SigtermAsInterrupt()
    term.install()
    term.defer()
    assert term.installed and not term.active
    signal.raise_signal(signal.SIGTERM)  # no KeyboardInterrupt: the session is finishing
    assert term.received == 1 and previous == []
    term.restore()


def test_install_off_the_main_thread_changes_nothing(previous):
    term = _SigtermAsInterrupt()
    before = signal.getsignal(signal.SIGTERM)
    done: list[bool] = []
    thread = threading.Thread(target=lambda: done.append(term.install()))
    thread.start()
    thread.join()
    assert done == [False] and not term.installed
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_docker_handler_removes_its_containers_then_the_ctrl_c_path_runs(previous):
    """Containers started while SIGTERM acts as Ctrl-C: a SIGTERM removes them first, then
    raises KeyboardInterrupt; once they are gone ours is back in place."""
    term = _SigtermAsInterrupt()
    term.install()
    try:
        live = LiveContainers()
        client = _ApiClient()
        live.add("c1", "one", client)
        assert signal.getsignal(signal.SIGTERM) == live.on_sigterm
        with pytest.raises(KeyboardInterrupt, match=STOPPED_BY_SIGTERM):
            signal.raise_signal(signal.SIGTERM)
        assert client.api.removed == ["c1"]
        assert signal.getsignal(signal.SIGTERM) == term._on_sigterm
        live.add("c2", "two", client)  # the next server: the docker handler again on top
        live.discard("c2")
        assert signal.getsignal(signal.SIGTERM) == term._on_sigterm
    finally:
        term.restore()
    assert previous == []


def test_restore_leaves_a_handler_installed_on_top_which_then_reaches_the_previous_one(previous):
    term = _SigtermAsInterrupt()
    term.install()
    live = LiveContainers()
    client = _ApiClient()
    live.add("c1", "one", client)
    term.restore()  # a container still runs: its handler stays
    assert signal.getsignal(signal.SIGTERM) == live.on_sigterm
    signal.raise_signal(signal.SIGTERM)  # removes it, then ours, restored, passes it on
    assert client.api.removed == ["c1"]
    assert previous == [signal.SIGTERM]


class _Api:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove_container(self, container_id: str, force: bool = False, v: bool = False) -> None:
        self.removed.append(container_id)


class _ApiClient:
    def __init__(self) -> None:
        self.api = _Api()
