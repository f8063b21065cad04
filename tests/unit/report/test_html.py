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
    assert {"banner", "matrix", "verdicts", "measured", "plots", "provenance", "plot-decode_tpot_x"} <= set(ids)
    links = [attrs["href"][1:] for tag, attrs in elements.tags if tag == "a" and attrs.get("href", "").startswith("#")]
    assert links and set(links) <= set(ids)  # every in-page link lands on something
    # the banner, the matrix, the verdicts, then plots, measured figures and provenance
    order = ["banner", "matrix", "verdicts", "plots", "measured", "provenance"]
    assert [ids.index(i) for i in order] == sorted(ids.index(i) for i in order)
    assert "<style>" in page and SVG in page
    assert 'content="width=device-width, initial-scale=1"' in page


def test_failing_tests_come_first_open_with_what_changed_and_why():
    page = html_report(sample_document())
    gates = re.findall(r'<details id="(gate-\d)" class="gate (\w+)"( open)?>', page)
    assert gates == [("gate-1", "fail", " open"), ("gate-2", "fail", " open"), ("gate-0", "pass", "")]
    assert (
        '<tr class="regressed"><td class="key">decode_tok_s</td><td class="num more" data-label="baseline">99.0</td>'
        '<td class="num more" data-label="measured">86.0</td>'
    ) in page
    for line in REGRESSION_EXPLAINED:
        assert f"<p>{line.replace('->', '-&gt;')}</p>" in page
    assert "<dt>vLLM version</dt><dd>0.33.0</dd>" in page


def test_without_plots_the_page_says_how_to_get_them_and_text_is_escaped():
    doc = sample_document()
    doc["runs"][0]["server"]["name"] = "<b>x</b>"
    page = html_report(doc, plots_missing="plots need matplotlib: pip install 'pytest-llmperf[report]'")
    assert '<p class="missing">plots need matplotlib: pip install &#x27;pytest-llmperf[report]&#x27;</p>' in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_the_matrix_puts_failing_cells_first_each_linked_to_its_table():
    page = html_report(sample_document())
    matrix = page[page.index('<section id="matrix">') : page.index('<section id="verdicts">')]
    header = re.findall(r"<th(?: class=num)?>(.+?)</th>", matrix.replace("<wbr>", ""))
    assert header == ["server", "conc", "decode_tok_s", "mtp_speedup", "acceptance_rate"]
    rows = re.findall(
        r'<tr><th scope=row>([^<]+)<span class="at"> @ \d+</span></th><td class="num conc">(\d+)</td>(.*?)</tr>', matrix
    )
    assert [(server, c) for server, c, _ in rows] == [("qwen3.6-27b-fp8-mtp", "8"), ("qwen3.6-27b-fp8", "1")]
    cells = re.findall(r'<td class="v ([\w-]+)" data-label="\w+"><a href="#(gate-\d)">([^<]+)<small>', rows[0][2])
    assert cells == [("regressed", "gate-1", "-13.1%"), ("regressed", "gate-2", "-10.6%"), ("pass", "gate-1", "-0.010")]
    assert rows[1][2].endswith("<td></td><td></td>")  # the base server gates decode only


def test_the_banner_is_red_with_the_counts_when_a_test_failed_green_when_none_did():
    doc = sample_document()
    page = html_report(doc)
    banner = page[page.index('<div id="banner"') : page.index('<section id="matrix">')]
    assert '<div id="banner" class="banner fail" role="status">' in banner
    assert '<p class="headline"><b>FAIL</b> 2 of 3 tests failed</p>' in banner
    assert '<p class="counts"><span>2 fail</span><span>1 pass</span></p>' in banner
    cells = "4 gated cells: 2 regressed, 1 inconclusive, 1 pass"
    assert f"target sim · profile smoke · 2 servers · {cells} · plugin 0.1.0" in banner
    for gate in doc["verdicts"]:
        gate["outcome"] = "pass"
    assert "<b>PASS</b> 3 of 3 tests passed</p>" in html_report(doc)
    doc["verdicts"][0]["outcome"] = "warn"
    assert "<b>PASS</b> 3 of 3 tests passed, 1 with warnings</p>" in html_report(doc)
    doc["verdicts"] = []
    assert 'class="banner none"' in html_report(doc)


def test_on_a_narrow_screen_a_verdict_rows_cells_carry_their_header_and_the_verdict_goes_first():
    page = html_report(sample_document())
    assert '<table class="stack wrap verdict">' in page
    assert '<td class="first">!! REGRESSED</td>' in page  # beside the metric (class key) under 640 px
    assert "@media (max-width: 640px)" in page and "table.verdict .first { grid-column: 3; grid-row: 1;" in page
    measured = page[page.index('<section id="measured">') :]
    assert '<td class="key">qwen3.6-27b-fp8-mtp<span class="at"> @ 8</span></td><td class="num conc">8</td>' in measured


def test_provenance_is_one_block_per_server_after_a_block_of_what_they_share():
    doc = sample_document()
    doc["runs"][2]["provenance"]["image"] = "vllm/vllm-openai:nightly"  # the MTP server's first run
    page = html_report(doc)
    section = page[page.index('<section id="provenance">') :]
    titles = re.findall(r"<h3>([^<]+)</h3>", section)
    assert titles == ["all 2 servers", "qwen3.6-27b-fp8", "qwen3.6-27b-fp8-mtp"]
    shared, base, mtp = section.split("<h3>")[1:]
    assert "<dt>vLLM version</dt><dd>0.33.0</dd>" in shared and "<dt>image</dt>" not in shared
    assert "<dt>image</dt><dd>vllm/vllm-openai:cu130-nightly</dd>" in base
    assert "<dt>image</dt><dd>vllm/vllm-openai:nightly</dd>" in mtp
