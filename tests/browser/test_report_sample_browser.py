"""The committed sample report (docs/report-sample/report.html) as a reader sees it, in
Debian's Chromium: at 1280 x 800 no element's content is wider than its box (every
verdict table opened, no scrolling box that would need to scroll); at 390 x 844 every
verdict table's verdict cell lies inside the screen; the banner and the matrix come before
any plot, the verdicts before the plots; and the committed screenshots are of this page.

Skips without Chromium or Playwright, except under LLMPERF_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.browser.test_report_browser import CUT_TEXT, DEAD_LINKS, OPEN_ALL, chromium_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "report-sample"

# Each verdict table's verdict cells: where they are, against the screen's width.
VERDICT_CELLS = """() => [...document.querySelectorAll("table.verdict")].map(table => {
  const cells = [...table.querySelectorAll("tbody td.first")].map(td => td.getBoundingClientRect());
  return {id: table.closest("details").id, rows: table.tBodies[0].rows.length,
          left: Math.min(...cells.map(b => b.left)), right: Math.max(...cells.map(b => b.right)),
          narrowest: Math.min(...cells.map(b => b.width))};
})"""


def _pixels(png: bytes):
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_the_sample_report_reads_at_a_laptops_and_a_phones_width(width, height):
    chromium = chromium_or_skip()
    pytest.importorskip("matplotlib")
    from playwright.sync_api import sync_playwright

    url = (SAMPLE / "report.html").resolve().as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url, wait_until="load")
            top = page.screenshot()  # as the page opens: what the committed screenshot shows
            assert page.evaluate(DEAD_LINKS) == []

            banner, matrix = page.locator("#banner"), page.locator("#matrix")
            first_plot = page.locator("figure svg").first.bounding_box()["y"]
            assert banner.bounding_box()["y"] < matrix.bounding_box()["y"] < first_plot
            assert page.locator("#verdicts").bounding_box()["y"] < first_plot
            assert banner.inner_text().startswith("FAIL") and "tests failed" in banner.inner_text()
            assert banner.bounding_box()["y"] < height / 4  # the first thing a reader sees

            page.evaluate(OPEN_ALL)
            assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
            verdicts = page.evaluate(VERDICT_CELLS)
            assert len(verdicts) == 18 and all(v["rows"] >= 1 for v in verdicts)
            if width == 1280:
                assert page.evaluate(CUT_TEXT, False) == []  # nothing wider than its box, no box that scrolls
            else:
                outside = [v for v in verdicts if v["left"] < 0 or v["right"] > width or v["narrowest"] < 40]
                assert outside == [], outside  # each verdict on the screen, beside its metric
                assert page.evaluate(CUT_TEXT, True) == []
        finally:
            browser.close()

    name = "screenshot.png" if width == 1280 else "screenshot-phone.png"
    committed = _pixels((SAMPLE / name).read_bytes())
    now = _pixels(top)
    assert committed.shape == now.shape == (height, width, 3)
    # The same page drawn by the same browser: at most a few glyphs apart (a font's hinting).
    differ = (abs(committed - now).max(axis=2) > 0.1).mean()
    assert differ < 0.01, (
        f"{name} is not this page ({differ:.1%} of pixels differ): python scripts/report_sample.py --render"
    )
