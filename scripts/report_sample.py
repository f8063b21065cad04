"""Render a report folder again from its report.json, and screenshot its report.html.

The committed sample (docs/report-sample/, see its README.md) is made in two steps:

    pytest tests/perf --llmperf-sim --llmperf-profile smoke --llmperf-report docs/report-sample
    python scripts/report_sample.py docs/report-sample

The second writes docs/report-sample/screenshot.png: the top of report.html in Debian's
Chromium (driven by Playwright through its executable_path; .ci/setup_browser.sh installs
it). `--render` first draws report.html, summary.md and plots/ again from report.json
(after a change to the report code, without running the suite again); `--known-set`
writes the unit tests' known result set instead (tests/unit/report/sample.py), to try
the page without running anything.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_llmperf.report.folder import JSON_NAME, write_report_files  # noqa: E402

SCREENSHOT = "screenshot.png"


def screenshot(html: Path, out: Path, width: int = 1200, height: int = 1600) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium on PATH: run .ci/setup_browser.sh (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(html.resolve().as_uri(), wait_until="load")
            page.screenshot(path=str(out))
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a --llmperf-report folder")
    parser.add_argument("--render", action="store_true", help="draw the page, summary and plots from report.json")
    parser.add_argument("--known-set", action="store_true", help="write the unit tests' known result set")
    parser.add_argument("--no-screenshot", action="store_true")
    args = parser.parse_args(argv)
    folder: Path = args.folder
    if args.known_set:
        from tests.unit.report.sample import sample_document

        print(write_report_files(sample_document(), folder).describe())
    elif args.render:
        document = json.loads((folder / JSON_NAME).read_text(encoding="utf-8"))
        print(write_report_files(document, folder).describe())
    if not args.no_screenshot:
        screenshot(folder / "report.html", folder / SCREENSHOT)
        print(f"screenshot: {folder / SCREENSHOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
