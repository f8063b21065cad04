"""The history a session keeps: lines for the history file appended at flush(), or, with a
shared store, kept apart for the store's batch and read back from the store."""

from __future__ import annotations

from pathlib import Path

from pytest_llmperf.baselines import history
from pytest_llmperf.judging.history_log import HistoryLog
from pytest_llmperf.measuring.measured import MeasuredRun
from pytest_llmperf.options import resolve_options
from pytest_llmperf.servers.spec import ServerSpec
from pytest_llmperf.store.files import HistoryFileStore
from pytest_llmperf.workload.workload import resolve_workload

RUN = MeasuredRun(
    server=ServerSpec(name="m", model="org/m"),
    workload=resolve_workload({"num_prompts": 4}, 8),
    results=[],
    samples={"decode_tok_s": [100.0]},
    provenance={"date": "2026-12-01T00:00:00"},
)


def log(tmp_path: Path, shared: HistoryFileStore | None = None, **cli: str) -> HistoryLog:
    options = resolve_options(lambda dest: {"llmperf_sim": True, **cli}.get(dest), lambda name: "")
    reader = None if shared is None else (lambda target: shared.history_lines(target=target))
    return HistoryLog(options, tmp_path / "baselines", tmp_path, lambda run: {"model": "org/m"}, reader)


def test_without_a_store_the_lines_go_to_the_file_beside_the_baselines_at_flush(tmp_path: Path) -> None:
    kept = log(tmp_path)
    kept.append(RUN, "sim", [("decode_tok_s", 100.0, "pass", None, 100.0, None)])
    path = tmp_path / "baselines" / "sim" / "history.jsonl"
    assert kept.path("sim") == path and kept.for_store() == [] and not path.exists()
    assert kept.flush() == (1, [])
    assert [r["value"] for r in history.read([path]).records] == [100.0]
    assert kept.flush() == (0, [])  # each line once
    assert [line["value"] for line in log(tmp_path).earlier_lines(RUN, "sim", "decode_tok_s")] == [100.0]


def test_with_a_store_the_lines_are_kept_for_it_and_the_earlier_ones_read_from_it(tmp_path: Path) -> None:
    store = HistoryFileStore(tmp_path / "store.jsonl")
    earlier = history.make_record(
        server="m",
        concurrency=8,
        metric="decode_tok_s",
        value=97.0,
        outcome="pass",
        target="sim",
        provenance={"date": "2026-11-30"},
        workload=history.workload_hash({"model": "org/m"}),
    )
    assert earlier is not None
    history.append(store.history_path, [earlier])
    shared = log(tmp_path, store)
    shared.append(RUN, "sim", [("decode_tok_s", 100.0, "pass", None, 97.0, None)])
    assert shared.path("sim") is None
    assert [(line["value"], line["target"]) for line in shared.for_store()] == [(100.0, "sim")]
    assert shared.flush() == (0, [])  # the store's lines wait for the session's end
    assert [line["value"] for line in shared.for_store()] == [100.0]
    assert [line["value"] for line in shared.earlier_lines(RUN, "sim", "decode_tok_s")] == [97.0]
    assert history.find_files(tmp_path / "baselines") == []


def test_off_keeps_nothing_anywhere(tmp_path: Path) -> None:
    off = log(tmp_path, HistoryFileStore(tmp_path / "store.jsonl"), llmperf_history="off")
    off.append(RUN, "sim", [("decode_tok_s", 100.0, "pass", None, None, None)])
    assert off.for_store() == [] and off.flush() == (0, []) and off.earlier_lines(RUN, "sim", "decode_tok_s") == []
