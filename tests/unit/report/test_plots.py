"""The plots of a known result set: valid SVG of a sensible size, one per kind, the same
bytes for the same document, and ids that never collide between plots of one page."""

import re
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib")

from pytest_llmperf.report import plots  # noqa: E402
from tests.unit.report.sample import sample_document  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}svg"


@pytest.fixture(scope="module")
def drawn():
    return plots.render_plots(sample_document())


def test_every_kind_of_plot_is_drawn_without_error(drawn):
    made, errors = drawn
    assert errors == []
    assert [p.name for p in made] == [
        "decode_tpot_Qwen-Qwen3.6-27B-FP8",
        "speedup_Qwen-Qwen3.6-27B-FP8",
        "acceptance_qwen3.6-27b-fp8-mtp",
        "latency_qwen3.6-27b-fp8",
        "latency_qwen3.6-27b-fp8-mtp",
        "timeline_qwen3.6-27b-fp8-mtp_c8",
    ]


def test_each_is_a_valid_svg_of_sensible_size_with_its_labels(drawn):
    made, _ = drawn
    for plot in made:
        root = ET.fromstring(plot.svg)
        assert root.tag == SVG, plot.name
        width, height = (float(root.get(k).removesuffix("pt")) for k in ("width", "height"))
        assert 300 < width < 1200 and 150 < height < 700, (plot.name, width, height)
        assert 5_000 < len(plot.svg) < 500_000, plot.name
    text = {p.name: p.svg for p in made}
    assert "decode tok/s (aggregate)" in text["decode_tpot_Qwen-Qwen3.6-27B-FP8"]
    assert "published" in text["decode_tpot_Qwen-Qwen3.6-27B-FP8"]
    assert "MTP speedup (x)" in text["speedup_Qwen-Qwen3.6-27B-FP8"]
    assert "position 3" in text["acceptance_qwen3.6-27b-fp8-mtp"]
    assert "requests in flight" in text["timeline_qwen3.6-27b-fp8-mtp_c8"]


def test_the_same_document_draws_the_same_bytes_and_ids_are_unique_across_plots(drawn):
    made, _ = drawn
    again, _ = plots.render_plots(sample_document())
    assert [p.svg for p in again] == [p.svg for p in made]
    ids = [i for p in made for i in set(re.findall(r'\bid="([^"]+)"', p.svg))]
    generated = [i for i in ids if re.fullmatch(r"[mp][0-9a-f]{8,}", i)]  # matplotlib's hashed ids
    assert generated and len(generated) == len(set(generated))


def test_a_plot_that_fails_is_reported_and_the_others_still_come(monkeypatch):
    def broken(*args):
        raise ValueError("bad data")

    monkeypatch.setattr(plots, "plot_acceptance", broken)
    made, errors = plots.render_plots(sample_document())
    assert [(e.name, e.error) for e in errors] == [("acceptance_qwen3.6-27b-fp8-mtp", "ValueError: bad data")]
    assert len(made) == 5
