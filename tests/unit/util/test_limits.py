"""Open-file limits (util/limits.py): EMFILE recognised, the soft limit raised for one run
only when needed and put back, and the one-line message naming limits and fix."""

import errno
import resource

import pytest

from pytest_llmperf.util import limits


@pytest.fixture
def soft_limit():
    """Set this process's soft RLIMIT_NOFILE for the test (never the hard one), then restore it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def set_soft(value):
        resource.setrlimit(resource.RLIMIT_NOFILE, (value, hard))

    try:
        yield set_soft, hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_emfile_and_enfile_are_too_many_open_files_and_nothing_else_is():
    assert limits.is_too_many_open_files(OSError(errno.EMFILE, "Too many open files"))
    assert limits.is_too_many_open_files(OSError(errno.ENFILE, "Too many open files in system"))
    assert not limits.is_too_many_open_files(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert not limits.is_too_many_open_files(RuntimeError("EMFILE"))


def test_a_concurrency_that_fits_changes_nothing():
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    with limits.open_files_for(1) as raised:
        assert raised is None and resource.getrlimit(resource.RLIMIT_NOFILE) == before


def test_the_soft_limit_is_raised_for_the_block_within_the_hard_one_and_put_back(soft_limit):
    set_soft, hard = soft_limit
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"hard limit {hard} leaves no room to raise the soft one")
    low = limits.open_fds() + 16
    set_soft(low)
    with limits.open_files_for(500) as raised:
        assert raised == (low, 1024)  # what 500 streams need, rounded up
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (1024, hard)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (low, hard)


def test_no_room_under_the_hard_limit_changes_nothing(monkeypatch):
    monkeypatch.setattr(limits, "open_files_limit", lambda: (64, 64))
    calls = []
    monkeypatch.setattr(limits.resource, "setrlimit", lambda *args: calls.append(args))
    with limits.open_files_for(500) as raised:
        assert raised is None
    assert calls == []


def test_the_message_names_the_concurrency_the_limits_and_the_fix(monkeypatch):
    monkeypatch.setattr(limits, "open_files_limit", lambda: (256, 256))
    monkeypatch.setattr(limits, "open_fds", lambda: 30)
    assert limits.too_many_open_files(1000) == (
        "too many open files at concurrency 1000 (each stream holds a socket): RLIMIT_NOFILE is soft 256, "
        "hard 256; raise it before pytest, e.g. `ulimit -n 4096` (above the hard limit: as root, or in "
        "/etc/security/limits.conf), or lower the concurrency"
    )
    monkeypatch.setattr(limits, "open_files_limit", lambda: (1024, resource.RLIM_INFINITY))
    message = limits.too_many_open_files(5000)
    assert "soft 1024, hard unlimited; raise it before pytest, e.g. `ulimit -n 5120`, or lower" in message
    monkeypatch.setattr(limits, "open_files_limit", lambda: (8192, 8192))  # ran out above the estimate
    assert "e.g. `ulimit -n 16384` (above the hard limit" in limits.too_many_open_files(100)
