"""The history store: lines, appends under a lock from several processes, reading back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmperf.baselines import history

PROVENANCE = {
    "date": "2026-12-01T02:00:00+00:00",
    "image": "vllm/vllm-openai:nightly",
    "image_digest": "sha256:0123456789abcdef0123",
    "vllm_version": "0.32.0",
    "git_commit": "abc1234",
    "target": "gpu",
}


def line(value=400.0, outcome="pass", **extra):
    fields = dict(
        server="qwen",
        concurrency=8,
        metric="steady_decode_tok_s",
        value=value,
        outcome=outcome,
        target="sim",
        provenance=PROVENANCE,
        workload="w1",
    )
    fields.update(extra)
    return history.make_record(**fields)


def test_a_record_keeps_what_the_gate_knew_in_a_short_line():
    record = line(407.93214, noise=4.1, confidence=0.99, baseline=410.0, reps=2)
    assert record == {
        "date": "2026-12-01T02:00:00+00:00",
        "server": "qwen",
        "concurrency": 8,
        "metric": "steady_decode_tok_s",
        "value": 407.932,
        "noise": 4.1,
        "confidence": 0.99,
        "baseline": 410.0,
        "outcome": "pass",
        "reps": 2,
        "target": "sim",
        "image": "vllm/vllm-openai:nightly",
        "digest": "sha256:0123456789abcdef0123",
        "vllm": "0.32.0",
        "commit": "abc1234",
        "workload": "w1",
    }
    assert len(history.encode([record])) < 330


def test_no_value_no_line_and_absent_fields_are_left_out():
    assert line(None) is None
    assert line(float("nan")) is None
    record = line(1.0, provenance={"date": "2026-12-01T00:00:00+00:00"})
    assert set(record) == {"date", "server", "concurrency", "metric", "value", "outcome", "target", "workload"}


def test_workload_hash_ignores_concurrency_and_tells_workloads_apart():
    a = history.workload_hash({"concurrency": 1, "num_prompts": 16, "model": "m"})
    assert a == history.workload_hash({"concurrency": 32, "model": "m", "num_prompts": 16})
    assert a != history.workload_hash({"concurrency": 1, "num_prompts": 17, "model": "m"})
    assert len(a) == 12


def test_append_and_read_back(tmp_path):
    path = tmp_path / "sim" / "history.jsonl"
    assert history.append(path, [line(1.0), line(2.0)]) == 2
    history.append(path, [line(3.0)])
    got = history.read([path])
    assert [r["value"] for r in got.records] == [1.0, 2.0, 3.0]
    assert got.skipped == [] and got.paths == [path]
    assert path.read_text().count("\n") == 3


def test_default_path_is_beside_the_baselines(tmp_path):
    assert history.default_path(tmp_path, "NVIDIA H200") == tmp_path / "NVIDIA-H200" / "history.jsonl"


def test_a_torn_line_is_skipped_and_named_and_the_next_append_starts_a_new_line(tmp_path):
    path = tmp_path / "history.jsonl"
    history.append(path, [line(1.0)])
    with open(path, "a") as fh:
        fh.write('{"date": "2026-12-02", "server": "qw')  # a writer that died mid-line
    history.append(path, [line(2.0)])
    with open(path, "a") as fh:
        fh.write('\n[1, 2]\n{"server": "x"}\n\n')
    got = history.read([path])
    assert [r["value"] for r in got.records] == [1.0, 2.0]
    assert [s.split(": ", 1)[1] for s in got.skipped] == [
        "not JSON (a torn or hand-edited line)",
        "not a JSON object",
        "missing date, concurrency, metric, value, outcome",
    ]
    assert got.skipped[0].startswith(f"{path}:2:")


def test_reading_a_folder_is_an_error_and_a_missing_file_no_history(tmp_path):
    with pytest.raises(history.HistoryError, match="is a folder"):
        history.read([tmp_path])
    assert history.read([tmp_path / "none.jsonl"]).records == []


def test_find_files_under_a_baselines_folder(tmp_path):
    for target in ("sim", "NVIDIA-H200"):
        history.append(history.default_path(tmp_path, target), [line(1.0)])
    assert [p.parent.name for p in history.find_files(tmp_path)] == ["NVIDIA-H200", "sim"]
    assert history.find_files(tmp_path / "sim" / "history.jsonl") == [tmp_path / "sim" / "history.jsonl"]
    assert history.find_files(tmp_path / "nothing") == []


def test_series_are_per_target_server_concurrency_metric_and_workload_in_date_order():
    records = [
        line(2.0, provenance={**PROVENANCE, "date": "2026-12-02"}),
        line(1.0, provenance={**PROVENANCE, "date": "2026-12-01"}),
        line(9.0, workload="w2"),
        line(8.0, concurrency=32),
        line(7.0, outcome="invalid"),  # not a measurement to trust
    ]
    got = history.series(records)
    assert [r["value"] for r in got[("sim", "qwen", 8, "steady_decode_tok_s", "w1")]] == [1.0, 2.0]
    assert set(got) == {
        ("sim", "qwen", 8, "steady_decode_tok_s", "w1"),
        ("sim", "qwen", 8, "steady_decode_tok_s", "w2"),
        ("sim", "qwen", 32, "steady_decode_tok_s", "w1"),
    }


WRITER = """
import sys
from pytest_llmperf.baselines import history
path, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(count):
    lines = [
        history.make_record(server=f"w{worker}", concurrency=c, metric="steady_decode_tok_s", value=i + c / 100,
                            outcome="pass", target="sim", provenance={"date": "2026-12-01T00:00:00+00:00",
                            "image": "x" * 200}, workload="w")
        for c in (1, 8, 32)
    ]
    history.append(path, lines)
"""


def test_concurrent_appends_from_several_processes_leave_every_line_intact(tmp_path):
    path = tmp_path / "history.jsonl"
    workers, count = 6, 150
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w), str(count)], env=env) for w in range(workers)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * workers
    raw = path.read_bytes().split(b"\n")
    assert raw[-1] == b""  # ends with a newline
    decoded = [json.loads(r) for r in raw[:-1]]  # every line whole JSON: none torn or interleaved
    assert len(decoded) == workers * count * 3
    for w in range(workers):
        mine = [r["value"] for r in decoded if r["server"] == f"w{w}"]
        # each append's three lines stay together and in order
        assert mine == [i + c / 100 for i in range(count) for c in (1, 8, 32)]


def test_on_the_simulator_its_flags_stand_for_the_image():
    record = line(1.0, provenance={"date": "d", "simulator": True, "sim_args": ["--sim-step-time-scale", "1.05"]})
    assert record["sim"] == "--sim-step-time-scale 1.05"
    assert "sim" not in line(1.0, provenance={"date": "d", "sim_args": []})
