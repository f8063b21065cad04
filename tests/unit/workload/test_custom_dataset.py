"""A user's JSONL file of prompts: loading, every bad line located, vLLM's shuffle."""

from __future__ import annotations

import json
import os
import random

import pytest

from pytest_llmperf.workload.custom_dataset import CustomDatasetError, read_custom, sample_custom
from pytest_llmperf.workload.dataset import DatasetError, DatasetNotFoundError

WRITE = '; write {"prompt": "...", "max_tokens": 128}'
LEAVE_OUT = "; or leave it out for the workload's max_tokens"


def write(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_valid_file_loads_each_prompt_with_its_line_and_max_tokens(tmp_path):
    path = write(
        tmp_path / "p.jsonl",
        '{"prompt": "What is the capital of India?", "max_tokens": 10}',
        "",  # blank lines are skipped, and the numbers still name the file's lines
        '{"prompt": "Summarise Hamlet."}',
        '{"prompt": "Count to three.", "output_tokens": 7}',  # vLLM's name for it
    )
    loaded = read_custom(path)
    assert [(p.line, p.prompt, p.max_tokens) for p in loaded.prompts] == [
        (1, "What is the capital of India?", 10),
        (3, "Summarise Hamlet.", None),
        (4, "Count to three.", 7),
    ]
    info = loaded.describe()
    assert info["prompts"] == 3 and info["size_bytes"] == path.stat().st_size and len(info["sha256"]) == 64


def test_a_line_without_max_tokens_gets_the_workloads(tmp_path):
    path = write(tmp_path / "p.jsonl", '{"prompt": "one two three", "max_tokens": 5}', '{"prompt": "four five"}')
    requests = sample_custom(read_custom(path), 2, seed=0, max_tokens=64, count_tokens=lambda ts: [len(t) for t in ts])
    by_prompt = {r.prompt: r for r in requests}
    assert by_prompt["one two three"].expected_output_len == 5
    assert by_prompt["four five"].expected_output_len == 64
    assert by_prompt["four five"].prompt_len == len("four five")  # the counter's figure


def test_sampling_is_vllms_seeded_shuffle_then_the_first_n(tmp_path):
    prompts = [f"prompt number {i}" for i in range(30)]
    path = write(tmp_path / "p.jsonl", *(json.dumps({"prompt": p}) for p in prompts))
    loaded = read_custom(path)
    picked = [r.prompt for r in sample_custom(loaded, 10, seed=3)]
    # vLLM's CustomDataset: random.seed(seed); random.shuffle(data); the first num_requests.
    expected = list(prompts)
    random.seed(3)
    random.shuffle(expected)
    assert picked == expected[:10]
    assert [r.prompt for r in sample_custom(loaded, 10, seed=3)] == picked
    assert [r.prompt for r in sample_custom(loaded, 10, seed=4)] != picked
    # Asking for more (the warm-up's) keeps the first ones: measured prompts do not move.
    assert [r.prompt for r in sample_custom(loaded, 14, seed=3)][:10] == picked


def test_too_few_lines_is_an_error_naming_both_counts_and_the_fix(tmp_path):
    loaded = read_custom(write(tmp_path / "p.jsonl", '{"prompt": "a"}', '{"prompt": "b"}'))
    with pytest.raises(DatasetError) as exc:
        sample_custom(loaded, 3)
    assert str(exc.value) == (
        "p.jsonl has 2 prompts but 3 are needed; add lines to the file or ask for fewer prompts "
        "(prompts are never repeated)"
    )


LINE = 'each line must be one JSON object such as {"prompt": "...", "max_tokens": 128} (max_tokens optional)'


@pytest.mark.parametrize(
    "line, problem",
    [
        (
            "{not json}",
            "not JSON (Expecting property name enclosed in double quotes at column 2); write one complete object "
            "per line",
        ),
        ('{"prompt": "a"', "not JSON (Expecting ',' delimiter at column 15); write one complete object per line"),
        ('["a prompt"]', "expected a JSON object, found an array ['a prompt']" + WRITE),
        ('"a prompt"', "expected a JSON object, found a string 'a prompt'" + WRITE),
        ("42", "expected a JSON object, found a number 42" + WRITE),
        ('{"max_tokens": 5}', "no 'prompt'; give the prompt text as 'prompt'"),
        ('{"prompt": ""}', "'prompt' is empty; give the prompt text, or delete the line"),
        ('{"prompt": "   "}', "'prompt' is empty; give the prompt text, or delete the line"),
        ('{"prompt": 12}', "'prompt' must be a string, found a number 12"),
        ('{"prompt": null}', "'prompt' must be a string, found null None"),
        ('{"prompt": ["a", "b"]}', "'prompt' must be a string, found an array ['a', 'b']"),
        ('{"prompt": "a", "max_tokens": 0}', "'max_tokens' must be a whole number >= 1, found 0" + LEAVE_OUT),
        ('{"prompt": "a", "max_tokens": -3}', "'max_tokens' must be a whole number >= 1, found -3" + LEAVE_OUT),
        ('{"prompt": "a", "max_tokens": 12.5}', "'max_tokens' must be a whole number >= 1, found 12.5" + LEAVE_OUT),
        ('{"prompt": "a", "max_tokens": "64"}', "'max_tokens' must be a whole number >= 1, found '64'" + LEAVE_OUT),
        ('{"prompt": "a", "max_tokens": true}', "'max_tokens' must be a whole number >= 1, found True" + LEAVE_OUT),
        ('{"prompt": "a", "output_tokens": 0}', "'output_tokens' must be a whole number >= 1, found 0" + LEAVE_OUT),
        (
            '{"prompt": "a", "max_tokens": 4, "output_tokens": 5}',
            "'max_tokens' (4) and 'output_tokens' (5) differ; give one of them",
        ),
        (
            '{"prompt": "a", "max_token": 4}',
            "unknown key(s) ['max_token']; a line takes 'prompt' and optionally 'max_tokens'",
        ),
    ],
)
def test_every_kind_of_bad_line_is_named_with_its_number_and_the_fix(tmp_path, line, problem):
    path = write(tmp_path / "p.jsonl", '{"prompt": "fine"}', line, '{"prompt": "also fine"}')
    with pytest.raises(CustomDatasetError) as exc:
        read_custom(path)
    assert str(exc.value) == f"{path}: 1 bad line(s) of 3; {LINE}:\n  line 2: {problem}"


def test_not_utf8_names_the_line_and_the_byte(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    with pytest.raises(CustomDatasetError) as exc:
        read_custom(path)
    assert str(exc.value).endswith("line 2: not UTF-8 text (byte 16 of the line); save the file as UTF-8")


def test_every_bad_line_is_reported_at_once_the_first_ten_shown(tmp_path):
    path = write(tmp_path / "p.jsonl", *(["{}"] * 12), '{"prompt": "fine"}')
    with pytest.raises(CustomDatasetError) as exc:
        read_custom(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: 12 bad line(s) of 13;")
    assert [f"line {n}: no 'prompt'" in text for n in range(1, 13)] == [True] * 10 + [False] * 2
    assert text.endswith("... and 2 more bad line(s)")


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_an_empty_or_blank_file_is_an_error_with_the_fix(tmp_path, content):
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(CustomDatasetError) as exc:
        read_custom(path)
    assert str(exc.value) == (
        f"{path}: no prompts (the file is empty or blank); write one JSON object per line, such as "
        '{"prompt": "...", "max_tokens": 128}'
    )


def test_a_missing_file_a_folder_and_an_unreadable_file_are_errors(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="no such file; point the dataset path at a JSONL file of prompts"):
        read_custom(tmp_path / "missing.jsonl")
    with pytest.raises(CustomDatasetError, match="not a file; point the dataset path at a JSONL file of prompts"):
        read_custom(tmp_path)
    path = write(tmp_path / "locked.jsonl", '{"prompt": "a"}')
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # root reads any file: make one no one can read
            path.chmod(0o644)
            path.unlink()
            os.symlink("/proc/self/mem", path)  # exists, is a file to stat, fails to read
        with pytest.raises(CustomDatasetError, match="locked.jsonl: cannot read: .*; check its permissions"):
            read_custom(path)
    finally:
        path.unlink()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_prompts=0), "num_prompts must be a whole number >= 1, got 0"),
        (dict(num_prompts=1, max_tokens=0), "max_tokens must be a whole number >= 1, got 0"),
        (dict(num_prompts=1, seed=1.5), "seed must be a whole number, got 1.5"),
    ],
)
def test_bad_sampling_arguments_are_refused(tmp_path, kwargs, message):
    loaded = read_custom(write(tmp_path / "p.jsonl", '{"prompt": "a"}'))
    with pytest.raises(DatasetError, match=message):
        sample_custom(loaded, **kwargs)
