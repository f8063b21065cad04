"""--llmperf-report DIR: what the folder holds, with matplotlib and without."""

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_llmperf.report import folder, plots
from pytest_llmperf.report.json_report import report_text
from tests.unit.report.sample import sample_document


def test_a_json_path_writes_the_document_alone(tmp_path):
    files = folder.write_report_files(sample_document(), tmp_path / "r.json")
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    assert files.describe().startswith(f"full report: {tmp_path / 'r.json'} (JSON only;")


def test_a_folder_holds_the_json_the_summary_the_page_and_the_plots(tmp_path):
    pytest.importorskip("matplotlib")
    doc = sample_document()
    out = tmp_path / "reports"
    (out / "plots").mkdir(parents=True)
    (out / "plots" / "old_plot.svg").write_text("<svg/>")  # an earlier report's
    files = folder.write_report_files(doc, out)
    assert sorted(p.name for p in out.iterdir()) == ["plots", "report.html", "report.json", "summary.md"]
    assert (out / "report.json").read_text() == report_text(doc)
    svgs = sorted((out / "plots").iterdir())
    assert len(svgs) == 6 and "old_plot.svg" not in {p.name for p in svgs}
    for svg in svgs:
        assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 6
    assert "(plots/decode_tpot_Qwen-Qwen3.6-27B-FP8.svg)" in (out / "summary.md").read_text()
    assert files.describe() == f"report: {out / 'report.html'} (with summary.md, report.json, 6 plots in plots/)"
    assert json.loads((out / "report.json").read_text())["verdicts"][1]["changes"] == ["vLLM version: 0.32.0 -> 0.33.0"]


def test_without_matplotlib_the_page_and_summary_still_come_and_say_how_to_get_plots(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: False)
    monkeypatch.setattr(folder, "available", lambda: False)
    files = folder.write_report_files(sample_document(), tmp_path)
    assert not (tmp_path / "plots").exists() and files.plots == []
    for name in ("report.html", "summary.md"):
        assert "pip install 'pytest-llmperf[report]'" in (tmp_path / name).read_text().replace("&#x27;", "'")
    assert files.describe().endswith("; plots need matplotlib: pip install 'pytest-llmperf[report]'")
