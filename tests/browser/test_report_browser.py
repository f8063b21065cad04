"""report.html in a real headless browser: Debian's Chromium driven by Playwright (its
`executable_path`, so no browser is downloaded). The page loads with no console error
and no network request, every plot is laid out, and the screenshot is not blank.

No Chromium or no Playwright: skips with the reason, except under
LLMPERF_REQUIRE_BROWSER=1 (CI, after .ci/setup_browser.sh), where that is a failure.
"""

from __future__ import annotations

import io
import os
import shutil

import pytest

from pytest_llmperf.report.folder import write_report_files
from tests.unit.report.sample import sample_document

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REQUIRED = os.environ.get("LLMPERF_REQUIRE_BROWSER") == "1"


def chromium_or_skip() -> str:
    path = os.environ.get("LLMPERF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    reason = None
    if path is None:
        reason = "no Chromium on PATH; run .ci/setup_browser.sh (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "Playwright for Python is not installed (pip install -e '.[dev]')"
    if reason:
        if REQUIRED:
            pytest.fail(f"LLMPERF_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    assert path is not None
    return path


# Elements that stick out of the page, or whose content sticks out of them (shown past
# their edge, or hidden when they clip); a plot's insides are left out (the <svg> itself is
# not). With scrolling allowed, boxes that scroll (.scroll) and what is in them are left out
# too; without, a .scroll box that would have to scroll counts.
CUT_TEXT = """(scrollingAllowed) => {
  const width = document.documentElement.clientWidth, cut = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.parentElement.closest("svg")) continue;
    if (scrollingAllowed && el.parentElement.closest(".scroll")) continue;
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    const scrolls = scrollingAllowed && /auto|scroll/.test(style.overflowX);
    if ((box.width && (box.right > width + 0.5 || box.left < -0.5))
        || (!scrolls && el.clientWidth && el.scrollWidth > el.clientWidth + 1)
        || (/hidden|clip/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1))
      cut.push(`${el.tagName}.${el.className.baseVal ?? el.className}: ${el.textContent.slice(0, 60)}`);
  }
  return cut;
}"""
# Every <details> opened, so that what it hides is laid out and measured too.
OPEN_ALL = "() => document.querySelectorAll('details').forEach(d => d.open = true)"
# In-page links (href="#...") whose target is not on the page.
DEAD_LINKS = """() => [...document.querySelectorAll('a[href^="#"]')]
  .map(a => a.getAttribute("href")).filter(h => !document.getElementById(h.slice(1)))"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_report_opens_offline_fits_the_width_and_draws_something(tmp_path, width):
    chromium = chromium_or_skip()
    pytest.importorskip("matplotlib")
    import matplotlib.image
    from playwright.sync_api import sync_playwright

    doc = sample_document()
    for gate in doc["verdicts"]:  # test ids as long as the seed suite's: one word wider than a phone
        gate["test"] = gate["test"].replace("test_seed.py", "test_seed_suite.py") + "[qwen3.6-35b-a3b-fp8-mtp-32]"
    files = write_report_files(doc, tmp_path / "report")
    assert files.html is not None and len(files.plots) == 6
    page_url = files.html.resolve().as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_url, wait_until="load")
            page.wait_for_load_state("networkidle")
            assert page.title() == "pytest-llmperf report: sim"
            assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll of the page
            assert page.evaluate(CUT_TEXT, width < 1280) == []  # at 1280 not even a scrolling box may need to
            assert page.evaluate(DEAD_LINKS) == []
            matrix = page.locator("#matrix table.matrix")
            plots_y = page.locator("#plots").bounding_box()["y"]
            assert page.locator("#banner.banner.fail").bounding_box()["y"] < matrix.bounding_box()["y"] < plots_y
            assert matrix.is_visible() and page.locator("#verdicts").bounding_box()["y"] < plots_y
            failing = page.locator("table.matrix tbody tr").first.locator("td.v.regressed a")
            assert failing.count() == 2 and failing.first.get_attribute("href") == "#gate-1"
            svgs = page.locator("figure svg")
            boxes = [svgs.nth(i).bounding_box() for i in range(svgs.count())]
            assert len(boxes) == 6 and all(b is not None and b["width"] > 300 and b["height"] > 100 for b in boxes)
            assert page.locator("details.gate.fail[open] .explain").count() == 1
            png = page.screenshot(full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert [url for url in requests if url != page_url] == []  # nothing but the page itself
    (tmp_path / f"report-{width}.png").write_bytes(png)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000
    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert pixels.shape[1] == width and pixels.shape[0] > 2000  # the whole page: matrix, six plots, tables
    ink = (pixels[..., :3].mean(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert 0.02 < ink < 0.6
