"""The history files as a store: a folder (history.jsonl and one file per session) or a
history file alone, in baselines/history.py's format, a batch written twice written once,
and a night read back by `llmperf report --store` and `llmperf baselines --store`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.baselines import history
from pytest_llmperf.commands.cli import main
from pytest_llmperf.store.files import HistoryFileStore
from pytest_llmperf.store.protocol import ResultStore, StoreError
from pytest_llmperf.store.rows import finish_batch
from pytest_llmperf.store.session_info import new_session


def line(metric: str, value: float, target: str = "sim", date: str = "2026-12-01T00:00:00") -> dict[str, Any]:
    made = history.make_record(
        server="m",
        concurrency=8,
        metric=metric,
        value=value,
        outcome="pass",
        target=target,
        provenance={"date": date},
        workload="w",
    )
    assert made is not None
    return made


def batch(group: str, shard: int, lines: list[dict[str, Any]], verdict: str = "pass") -> dict[str, Any]:
    info = new_session(
        group=group, shard=(shard, 2), target="sim", image=None, git_commit=None, report_dir=None, env={}
    ).to_dict()
    document = {
        "runs": [],
        "verdicts": [{"server": "m", "concurrency": 8, "test": "t", "outcome": verdict, "verdicts": []}],
    }
    baselines = [(f"baselines/sim/m{shard}.json", f'{{"shard": {shard}}}\n')]
    return finish_batch(info, document, lines, 0, "2026-12-01T01:00:00", baselines)


def test_a_folder_keeps_sessions_and_history_lines_once(tmp_path: Path) -> None:
    store: ResultStore = HistoryFileStore(tmp_path / "night")
    assert store.version() == 0
    assert store.check() == 1 and store.version() == 1
    first = batch("g", 1, [line("decode_tok_s", 100.0), line("decode_tok_s", 50.0, target="gpu")])
    store.start_session(first["session"])
    assert [s["finished_at"] for s in store.sessions("g")] == [None]  # started, not finished
    assert store.write_batch(first) == 4  # the session, two history lines, one baseline file
    assert store.write_batch(first) == 0  # pushed again: nothing added
    on_disk = history.read([tmp_path / "night" / "history.jsonl"]).records
    assert [(r["target"], r["value"]) for r in on_disk] == [("sim", 100.0), ("gpu", 50.0)]
    assert store.history_lines(target="sim") == [line("decode_tok_s", 100.0)]
    assert store.history_lines(metrics=["tpot_ms_median"]) == []
    (row,) = store.sessions("g")
    assert row["id"] == first["session"]["id"] and row["finished_at"] == "2026-12-01T01:00:00"
    assert row["document"]["verdicts"][0]["outcome"] == "pass" and store.sessions("other") == []
    assert store.baseline_files(row["id"]) == [("baselines/sim/m1.json", '{"shard": 1}\n')]


def test_a_history_file_keeps_the_lines_alone_oldest_first(tmp_path: Path) -> None:
    store = HistoryFileStore(tmp_path / "h.jsonl")
    store.check()
    late, early = line("decode_tok_s", 2.0, date="2026-12-02"), line("decode_tok_s", 1.0, date="2026-12-01")
    assert store.write_batch(batch("g", 1, [late, early])) == 2
    assert store.write_batch(batch("g", 1, [late, early])) == 0  # the same lines: not appended again
    assert [r["value"] for r in store.history_lines()] == [1.0, 2.0]
    with pytest.raises(StoreError, match="a history file keeps no sessions"):
        store.sessions("g")


def test_a_path_of_the_wrong_kind_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("not a folder")
    with pytest.raises(StoreError, match=r"store .*taken: opening it: a file: give a folder"):
        HistoryFileStore(tmp_path / "taken").check()
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(StoreError, match="a folder, not a history file"):
        HistoryFileStore(tmp_path / "dir.jsonl").check()


def test_a_night_in_a_folder_store_is_reported_and_its_baselines_written_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = HistoryFileStore(tmp_path / "night")
    store.check()
    one, two = batch("n1", 1, [line("decode_tok_s", 100.0)]), batch("n1", 2, [], verdict="fail")
    store.start_session(one["session"])
    store.start_session(two["session"])
    store.write_batch(one)
    url = f"file://{tmp_path}/night"
    assert main(["report", str(tmp_path / "out"), "--store", url, "--session-group", "n1"]) == 3
    out = capsys.readouterr().out
    assert "1 of 2 shard(s) finished" in out and "shard 2/2 did not finish" in out
    store.write_batch(two)
    assert main(["report", str(tmp_path / "out"), "--store", url, "--session-group", "n1"]) == 1  # a failed verdict
    assert json.loads((tmp_path / "out" / "report.json").read_text())["session_group"] == "n1"
    assert main(["baselines", "--store", url, "--session-group", "n1", "--write", str(tmp_path / "co")]) == 0
    assert (tmp_path / "co" / "baselines" / "sim" / "m2.json").read_text() == '{"shard": 2}\n'
    assert main(["history", "--store", url]) == 0
    assert "decode_tok_s" in capsys.readouterr().out
