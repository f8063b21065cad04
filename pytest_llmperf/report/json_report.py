"""--llmperf-report: the report document (report/document.py) as a JSON file: every
run with its raw records, the verdicts and provenance."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.util.files import atomic_write_text


def report_text(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def write_report(doc: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, report_text(doc))
