"""util.files: atomic writes and the one cache root."""

import os
import stat
from pathlib import Path

import pytest

from pytest_llmperf.util import files


def test_atomic_write_creates_the_folder_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "a" / "b" / "x.json"
    files.atomic_write_text(path, "one\n")
    files.atomic_write_text(path, "two\n")
    assert path.read_text(encoding="utf-8") == "two\n"
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "x.txt"
    files.atomic_write_text(path, "old")
    with pytest.raises(TypeError):
        files.atomic_write_text(path, 42)  # type: ignore[arg-type]
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_atomic_write_gives_the_mode_of_a_plain_open_and_clears_a_crashed_writes_temp_file(tmp_path):
    old = os.umask(0o022)
    try:
        stray = tmp_path / ".x.json.abc123.tmp"  # what a process killed before os.replace leaves
        stray.write_text("half")
        files.atomic_write_text(tmp_path / "x.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_cache_root_and_token_counts_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    assert files.cache_root() == tmp_path
    assert files.token_counts_dir() == tmp_path / "token-counts"
    monkeypatch.setenv("LLMPERF_CACHE_DIR", "~/llmperf-cache")
    assert files.cache_root() == Path.home() / "llmperf-cache"
    monkeypatch.delenv("LLMPERF_CACHE_DIR")
    assert files.cache_root() == Path.home() / ".cache" / "pytest-llmperf"


def test_a_read_only_file_is_never_replaced_and_write_problem_says_so(tmp_path):
    path = tmp_path / "kept.json"
    path.write_text("old\n")
    path.chmod(0o444)
    assert files.write_problem(path) == "it is read-only (mode 444); make it writable to record over it"
    with pytest.raises(PermissionError, match="read-only"):
        files.atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n"


def test_write_problem_finds_a_file_in_the_way_of_the_folder_and_nothing_for_a_new_file(tmp_path):
    (tmp_path / "blocker").write_text("x")
    assert "is not a folder" in files.write_problem(tmp_path / "blocker" / "sub" / "f.json")
    assert files.write_problem(tmp_path / "new" / "deeper" / "f.json") is None
    assert list(tmp_path.iterdir()) == [tmp_path / "blocker"]  # the probe left nothing, created nothing
