"""report.html from a known result set: the elements a reader needs, nothing fetched."""

import re
from html.parser import HTMLParser

from pytest_llmperf.report.html import html_report
from pytest_llmperf.report.plots import Plot
from tests.unit.report.sample import REGRESSION_EXPLAINED, sample_document

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10pt" height="10pt"><rect id="p1" width="5" height="5"/></svg>'


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []
        self.fetches = []  # attributes a browser would fetch

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        for key in ("src", "href"):
            value = attrs.get(key)
            if value is not None and not value.startswith(("data:", "#")):
                self.fetches.append((tag, key, value))


def parse(page):
    parser = Elements()
    parser.feed(page)
    return parser


def test_the_page_is_self_contained_with_its_sections_and_inline_plots():
    page = html_report(sample_document(), [Plot("decode_tpot_x", "Decode", "caption", SVG)])
    assert page.startswith("<!DOCTYPE html>")
    elements = parse(page)
    assert elements.fetches == []  # no script, stylesheet, image or font from anywhere
    assert not any(tag in ("script", "iframe", "img") for tag, _ in elements.tags)
    ids = [attrs.get("id") for _, attrs in elements.tags if attrs.get("id")]
    assert {"matrix", "verdicts", "measured", "plots", "provenance", "plot-decode_tpot_x"} <= set(ids)
    links = [attrs["href"][1:] for tag, attrs in elements.tags if tag == "a" and attrs.get("href", "").startswith("#")]
    assert links and set(links) <= set(ids)  # every in-page link lands on something
    assert ids.index("matrix") < ids.index("plots") < ids.index("verdicts")
    assert "<style>" in page and SVG in page
    assert 'content="width=device-width, initial-scale=1"' in page


def test_failing_tests_come_first_open_with_what_changed_and_why():
    page = html_report(sample_document())
    gates = re.findall(r'<details id="(gate-\d)" class="gate (\w+)"( open)?>', page)
    assert gates == [("gate-1", "fail", " open"), ("gate-2", "fail", " open"), ("gate-0", "pass", "")]
    assert '<tr class="regressed"><td>decode_tok_s</td><td class=num>99.0</td><td class=num>86.0</td>' in page
    for line in REGRESSION_EXPLAINED:
        assert f"<p>{line.replace('->', '-&gt;')}</p>" in page
    assert "<td>vLLM version</td><td>0.33.0</td><td>0.33.0</td>" in page


def test_without_plots_the_page_says_how_to_get_them_and_text_is_escaped():
    doc = sample_document()
    doc["runs"][0]["server"]["name"] = "<b>x</b>"
    page = html_report(doc, plots_missing="plots need matplotlib: pip install 'pytest-llmperf[report]'")
    assert '<p class="missing">plots need matplotlib: pip install &#x27;pytest-llmperf[report]&#x27;</p>' in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_the_matrix_puts_failing_cells_first_each_linked_to_its_table():
    page = html_report(sample_document())
    matrix = page[page.index('<section id="matrix">') : page.index('<section id="plots">')]
    header = re.findall(r"<th(?: class=num)?>(.+?)</th>", matrix.replace("<wbr>", ""))
    assert header == ["server", "conc", "decode_tok_s", "mtp_speedup", "acceptance_rate"]
    rows = re.findall(r"<tr><th scope=row>([^<]+)</th><td class=num>(\d+)</td>(.*?)</tr>", matrix)
    assert [(server, c) for server, c, _ in rows] == [("qwen3.6-27b-fp8-mtp", "8"), ("qwen3.6-27b-fp8", "1")]
    cells = re.findall(r'<td class="v ([\w-]+)"><a href="#(gate-\d)">([^<]+)<small>', rows[0][2])
    assert cells == [("regressed", "gate-1", "-13.1%"), ("regressed", "gate-2", "-10.6%"), ("pass", "gate-1", "-0.010")]
    assert rows[1][2].endswith("<td></td><td></td>")  # the base server gates decode only
