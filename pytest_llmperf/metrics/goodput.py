"""Goodput at service-level objectives, exactly as `vllm bench serve --goodput` computes it.

SLOs are vLLM's `KEY:VALUE` pairs in milliseconds (`ttft:500 tpot:50 e2el:3000`); a
successful request is good when every value is at or under its SLO.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping

from pytest_llmperf.metrics.records import RequestRecord

SLO_NAMES = ("ttft", "tpot", "e2el")  # vLLM's VALID_NAMES, in its order
EXAMPLE = "ttft:500 tpot:50 e2el:3000"
MS_PER_S = 1000.0  # vLLM's MILLISECONDS_TO_SECONDS_CONVERSION
NONE_WORDS = ("none", "off")  # --llmperf-slos none: no SLOs, whatever the ini says


class SLOError(ValueError):
    """SLO text that cannot be read; the message says what is wrong and how to write it."""


def _fix() -> str:
    return f"write KEY:VALUE pairs in milliseconds separated by spaces, e.g. '{EXAMPLE}' (keys: {', '.join(SLO_NAMES)})"


def parse_slos(text: str) -> dict[str, float]:
    """'ttft:500 tpot:50' -> {'ttft': 500.0, 'tpot': 50.0} (ms), in SLO_NAMES order."""
    if not isinstance(text, str):
        raise SLOError(f"SLOs must be text such as '{EXAMPLE}', got {text!r}")
    pairs = [p for p in re.split(r"[\s,]+", text.strip()) if p]
    if not pairs:
        raise SLOError(f"no SLOs given in {text!r}; {_fix()}")
    found: dict[str, float] = {}
    for pair in pairs:
        name, colon, value = pair.partition(":")
        if not colon or not name or not value or ":" in value:
            raise SLOError(f"{pair!r} is not a KEY:VALUE pair; {_fix()}")
        if name not in SLO_NAMES:
            close = difflib.get_close_matches(name.lower(), SLO_NAMES, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}? " if close else ""
            raise SLOError(f"unknown SLO {name!r} in {pair!r}; {hint}the SLOs are {', '.join(SLO_NAMES)}")
        try:
            ms = float(value)
        except ValueError:
            raise SLOError(
                f"{pair!r}: {value!r} is not a number; give milliseconds as a plain number >= 0 (e.g. {name}:500)"
            ) from None
        if not math.isfinite(ms) or ms < 0:
            raise SLOError(f"{pair!r}: the SLO must be a finite number of milliseconds >= 0")
        if name in found:
            raise SLOError(f"{name} is given twice in {text!r}; give each SLO once")
        found[name] = ms
    return {name: found[name] for name in SLO_NAMES if name in found}


def _number(ms: float) -> str:
    return str(int(ms)) if float(ms).is_integer() else repr(float(ms))


def format_slos(slos: Mapping[str, float]) -> str:
    """The canonical text of parsed SLOs: 'ttft:500 tpot:50', in SLO_NAMES order."""
    return " ".join(f"{name}:{_number(slos[name])}" for name in SLO_NAMES if name in slos)


def canonical_slos(text: str | None) -> str:
    """SLO text as one spelling ('' for none: None, '' or none/off), so equal SLOs key alike."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", *NONE_WORDS)):
        return ""
    return format_slos(parse_slos(text))


def request_values(record: RequestRecord, clock_speed: float = 1.0) -> dict[str, float] | None:
    """A successful request's TTFT, TPOT (0 for one token or fewer) and E2EL in real-time
    seconds, as vLLM's goodput reads them; None without a token event."""
    if not record.ok or record.ttft is None or record.e2el is None:
        return None
    ttft, e2el = record.ttft, record.e2el
    tokens = record.completion_tokens or 1
    tpot = (e2el - ttft) / (tokens - 1) if tokens > 1 else 0.0
    return {"ttft": ttft * clock_speed, "tpot": tpot * clock_speed, "e2el": e2el * clock_speed}


def is_good(values: Mapping[str, float], slos: Mapping[str, float]) -> bool:
    """Every SLO met: its value at or under the SLO (vLLM: `s >= r`, in seconds)."""
    return all(slos[name] / MS_PER_S >= values[name] for name in slos)


def good_requests(records: Iterable[RequestRecord], slos: Mapping[str, float], clock_speed: float = 1.0) -> int:
    """How many requests met every SLO (successful ones only)."""
    good = 0
    for record in records:
        values = request_values(record, clock_speed)
        if values is not None and is_good(values, slos):
            good += 1
    return good
