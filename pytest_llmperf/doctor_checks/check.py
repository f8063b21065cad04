"""One check's line (passed, failed with its fix, warning, or not tried) and how a list of
them is printed and summed up."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.util.secrets import redact

OK, FAIL, WARN, SKIP = "ok", "fail", "warn", "skip"
MARKS = {OK: "✓", FAIL: "✗", WARN: "!", SKIP: "-"}
ASCII_MARKS = {OK: "PASS", FAIL: "FAIL", WARN: "WARN", SKIP: "SKIP"}
GIB = 1024**3


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # OK, FAIL, WARN or SKIP
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL


def use_ascii(stream: Any = None) -> bool:
    """PASS/FAIL instead of ✓/✗ where the stream cannot encode them."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "ascii"
    try:
        "✓✗".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def format_checks(checks: Sequence[Check], *, ascii_marks: bool = False) -> list[str]:
    marks = ASCII_MARKS if ascii_marks else MARKS
    lines = []
    for check in checks:
        lines.append(f"{marks[check.status]} {check.name}: {check.detail}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"    fix: {check.fix}")
    return lines


def summary_line(checks: Sequence[Check]) -> str:
    failed = sum(c.failed for c in checks)
    warned = sum(c.status == WARN for c in checks)
    tail = f", {warned} warning(s)" if warned else ""
    if failed:
        return f"{failed} of {len(checks)} checks failed{tail}"
    return f"all {sum(c.status == OK for c in checks)} checks passed{tail}"


def failed(checks: Iterable[Check]) -> list[Check]:
    return [c for c in checks if c.failed]


def last_lines(text: str, limit: int = 3) -> str:
    """The last `limit` lines of `text` that are not blank, on one line."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(kept[-limit:])


def redacted(checks: Sequence[Check], secrets: Sequence[str]) -> list[Check]:
    """No token value in any line (an error message could echo the environment)."""
    if not secrets:
        return list(checks)
    return [Check(c.name, c.status, redact(c.detail, secrets), redact(c.fix, secrets)) for c in checks]
