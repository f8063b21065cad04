"""--llmperf-report: a report document written as JSON, atomically and deterministically."""

import json

from pytest_llmperf.report.document import merge_reports
from pytest_llmperf.report.json_report import report_text, write_report
from tests.unit.report.documents import REGRESSED, document, gate_entry, run_entry


def test_writes_the_document_as_sorted_indented_json_creating_the_folder(tmp_path):
    doc = document([run_entry("m", 8, 100.0)], [gate_entry("t::a", "m", 8, [REGRESSED], outcome="fail")], ["m"])
    path = tmp_path / "out" / "report.json"
    write_report(doc, path)
    text = path.read_text()
    assert json.loads(text) == doc
    assert text == json.dumps(doc, indent=1, sort_keys=True) + "\n" == report_text(doc)
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary file left


def test_a_merged_document_writes_every_workers_runs_once(tmp_path):
    docs = {w: document([run_entry(w, 1, 1.0)], [], [w]) for w in ("gw0", "gw1")}
    path = tmp_path / "report.json"
    write_report(merge_reports(docs), path)
    data = json.loads(path.read_text())
    assert [(r["server"]["name"], r["worker"]) for r in data["runs"]] == [("gw0", "gw0"), ("gw1", "gw1")]
    assert data["workers"] == ["gw0", "gw1"]
