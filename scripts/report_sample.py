"""The sample report in docs/report-sample/: made by one command, checked by a test.

    python scripts/report_sample.py             # run the red night (about 3 minutes on 2 cores), then draw
    python scripts/report_sample.py --render    # draw again from the committed document.json
    python scripts/report_sample.py --check     # draw into a temporary folder; exit 1 naming what differs

The run is COMMAND below: the seed suite on the simulator at the smoke profile, every MTP
drafter accepting 15 % less, against the committed `sim` baselines, with no history (so
the page does not depend on the runs this machine made before). Its report.json, 3.7 MB of
raw records and /metrics pages, is trimmed to what the page draws from and committed as
document.json: the /metrics pages and reply texts go, each request keeps its send, chunk
and end times, token count and error, and a run the timeline plot does not draw keeps only
its first and last chunk time. The trim is checked as it is made: the page, the summary and
the plots drawn from document.json are those drawn from the whole report.json.

Drawing writes report.html, summary.md and plots/*.svg from document.json, then the two
screenshots in Debian's Chromium (Playwright, through its executable_path;
.ci/setup_browser.sh installs it): screenshot.png (1280 x 800, the top of the page) and
screenshot-phone.png (390 x 844). `--check` is what tests/unit/test_docs_report_sample.py
runs: the committed files must be what the code draws from document.json, dates, paths
and matplotlib's version line aside.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere: the checkout's package
    sys.path.insert(0, str(ROOT))

from pytest_llmperf.report import folder as report_folder  # noqa: E402
from pytest_llmperf.report.series import concurrency_of, server_name, timeline_runs  # noqa: E402

HTML_NAME, JSON_NAME, MARKDOWN_NAME = report_folder.HTML_NAME, report_folder.JSON_NAME, report_folder.MARKDOWN_NAME
PLOTS_DIR = report_folder.PLOTS_DIR

FOLDER = ROOT / "docs" / "report-sample"
DOCUMENT = "document.json"
SCREENSHOTS = {"screenshot.png": (1280, 800), "screenshot-phone.png": (390, 844)}
# The run, from the repository's root, with the report folder appended (the sample's page
# shows it with docs/report-sample/full).
COMMAND = (
    "pytest tests/perf --llmperf-sim --llmperf-profile smoke "
    "--llmperf-sim-args '--sim-acceptance-scale 0.85' --llmperf-history off --llmperf-report"
)
# What a request keeps in document.json: what the plots read (report/series.py).
RECORD_KEYS = ("send_time", "chunk_times", "end_time", "completion_tokens", "error")
RESULT_DROPS = ("metrics_before", "metrics_after")

_DATE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")
_MATPLOTLIB = re.compile(r"Matplotlib v[\w.+-]+")
# A plot: its opening tag kept (size, title), its drawing left out.
_SVG_BODY = re.compile(r"(<svg\b[^>]*>).*?</svg>", re.S)


def trim(document: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with only what report.html, summary.md and the plots draw from."""
    doc: dict[str, Any] = copy.deepcopy(dict(document))
    timelines = {(server_name(r), concurrency_of(r)) for r in timeline_runs(doc)}
    for run in doc.get("runs", []):
        whole = (server_name(run), concurrency_of(run)) in timelines
        for result in run.get("results", []):
            for key in RESULT_DROPS:
                result.pop(key, None)
            records = []
            for record in result.get("records", []):
                kept = {k: record[k] for k in RECORD_KEYS if k in record}
                times = kept.get("chunk_times") or []
                if not whole and len(times) > 2:
                    kept["chunk_times"] = [times[0], times[-1]]  # TTFT and TPOT need no more
                records.append(kept)
            result["records"] = records
    return doc


def draw(document: Mapping[str, Any], folder: Path) -> list[Path]:
    """report.html, summary.md and plots/ of `document` into `folder` (no report.json):
    the files written, relative to `folder`."""
    with tempfile.TemporaryDirectory() as tmp:
        files = report_folder.write_report_files(document, Path(tmp))
        if files.plot_errors or files.plots_missing:
            raise SystemExit(f"the sample needs every plot: {files.plot_errors or files.plots_missing}")
        folder.mkdir(parents=True, exist_ok=True)
        plots = folder / PLOTS_DIR
        if plots.is_dir():
            shutil.rmtree(plots)
        shutil.copytree(Path(tmp) / PLOTS_DIR, plots)
        for name in (HTML_NAME, MARKDOWN_NAME):
            shutil.copyfile(Path(tmp) / name, folder / name)
    return drawn_files(folder)


def drawn_files(folder: Path) -> list[Path]:
    plots = sorted(p.relative_to(folder) for p in (folder / PLOTS_DIR).glob("*.svg"))
    return [Path(HTML_NAME), Path(MARKDOWN_NAME), *plots]


def normalized(text: str) -> str:
    """Dates, this checkout's path and the drawing inside each plot left out of a
    comparison: a plot's strokes are matplotlib's (a new release draws them a little
    differently), what the report puts around them is ours."""
    text = text.replace(str(ROOT), "<root>")
    return _SVG_BODY.sub(r"\1</svg>", _MATPLOTLIB.sub("Matplotlib", _DATE.sub("<date>", text)))


def differences(committed: Path, fresh: Path) -> list[str]:
    """What differs between two drawn folders: missing or extra files (each plot is drawn),
    and files whose text differs once normalized."""
    ours, theirs = drawn_files(committed), drawn_files(fresh)
    out = [f"{p}: not committed" for p in theirs if p not in ours]
    out += [f"{p}: committed, no longer drawn" for p in ours if p not in theirs]
    for path in (p for p in theirs if p in ours):
        a = normalized((committed / path).read_text(encoding="utf-8"))
        b = normalized((fresh / path).read_text(encoding="utf-8"))
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            out.append(
                f"{path}: differs at character {at}: {a[at - 40 : at + 40]!r} (committed) vs {b[at - 40 : at + 40]!r}"
            )
    return out


def check(folder: Path) -> list[str]:
    document = json.loads((folder / DOCUMENT).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        draw(document, Path(tmp))
        return differences(folder, Path(tmp))


def run_suite(out: Path) -> dict[str, Any]:
    """COMMAND into `out`; the report document it wrote. The regressed tests fail, so exit 1
    is what a good run returns."""
    argv = [*shlex.split(COMMAND), str(out), "-p", "no:cacheprovider"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    print("running:", shlex.join(argv), flush=True)
    done = subprocess.run(argv, cwd=ROOT, env=env, check=False)
    if done.returncode not in (0, 1) or not (out / JSON_NAME).is_file():
        raise SystemExit(f"the run ended with exit status {done.returncode} and no {out / JSON_NAME}")
    document: dict[str, Any] = json.loads((out / JSON_NAME).read_text(encoding="utf-8"))
    return document


def write_document(document: Mapping[str, Any], folder: Path) -> None:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    (folder / DOCUMENT).write_text(text + "\n", encoding="utf-8")


def screenshots(folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("LLMPERF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium on PATH: run .ci/setup_browser.sh (apt-get install -y chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--disable-gpu"])
        try:
            for name, (width, height) in SCREENSHOTS.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto((folder / HTML_NAME).resolve().as_uri(), wait_until="load")
                page.screenshot(path=str(folder / name))
                page.close()
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=FOLDER, help="the sample's folder (default docs/report-sample)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--render", action="store_true", help="draw the sample again from its document.json")
    mode.add_argument("--check", action="store_true", help="exit 1 when the committed files are not what is drawn")
    mode.add_argument(
        "--from", dest="report", type=Path, help="trim this report.json COMMAND wrote instead of running it"
    )
    parser.add_argument("--no-screenshot", action="store_true", help="leave the screenshots as they are")
    args = parser.parse_args(argv)
    folder: Path = args.folder
    if args.check:
        stale = check(folder)
        for line in stale:
            print(line)
        if stale:
            print(f"the sample report is stale: run `python scripts/report_sample.py --render` and commit {folder}")
        return 1 if stale else 0
    if args.render:
        document = json.loads((folder / DOCUMENT).read_text(encoding="utf-8"))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            whole = json.loads(args.report.read_text(encoding="utf-8")) if args.report else run_suite(Path(tmp) / "r")
            document = trim(whole)
            with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
                draw(whole, Path(a))
                draw(document, Path(b))
                if differences(Path(a), Path(b)):
                    raise SystemExit(f"trimming changed what is drawn: {differences(Path(a), Path(b))}")
        write_document(document, folder)
    for path in draw(document, folder):
        print(f"wrote {folder / path}")
    if not args.no_screenshot:
        screenshots(folder)
        print("wrote", ", ".join(str(folder / name) for name in SCREENSHOTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
