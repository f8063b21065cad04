"""A baseline file checked as it loads: its JSON, its header, every entry and metric
(a value that is not its samples' median, an unknown key, a direction the registry does
not give), and a published file's figures; each problem a BaselineError naming it."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.baselines.layout import BaselineError, stable_float, workload_key
from pytest_llmperf.metrics.crosscheck import decode_outputs
from pytest_llmperf.metrics.registry import Direction, UnknownMetric, metric
from pytest_llmperf.metrics.uncertainty import decode_rows
from pytest_llmperf.stats.median import median_and_range


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BaselineError(path, f"not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise BaselineError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not text.strip():
        raise BaselineError(path, "empty file")
    try:
        return json.loads(text, parse_constant=lambda c: _reject_constant(path, c))
    except json.JSONDecodeError as exc:
        raise BaselineError(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _reject_constant(path: Path, name: str) -> Any:
    raise BaselineError(path, f"contains {name}, which is not a valid number in a baseline")


def _concurrency_key(path: Path, key: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]*", key):
        raise BaselineError(path, f"concurrency key {key!r} is not a positive integer")
    return int(key)


def _check_keys(path: Path, where: str, obj: Mapping[str, Any], allowed: set[str]) -> None:
    """Unknown keys are refused: a hand-added "tolerance" would otherwise be silently ignored."""
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise BaselineError(
            path,
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(allowed))} (tolerances belong in the "
            "test's marker or the project's ini, not in the baseline)",
        )


def check_header(path: Path, doc: Any, kind_fields: Mapping[str, str], formats: Sequence[int]) -> None:
    if not isinstance(doc, dict):
        raise BaselineError(path, f"expected a JSON object at the top level, got {type(doc).__name__}")
    _check_keys(path, "top level", doc, {"format", "concurrency", "note", *kind_fields})
    if isinstance(doc.get("format"), bool) or doc.get("format") not in formats:
        readable = " or ".join(map(str, formats))
        raise BaselineError(path, f"unsupported format {doc.get('format')!r} (this plugin reads format {readable})")
    for key, expected in kind_fields.items():
        if doc.get(key) != expected:
            raise BaselineError(
                path,
                f"{key!r} is {doc.get(key)!r} but the file's location says {expected!r}; "
                "was it copied from another target or server?",
            )
    if not isinstance(doc.get("concurrency"), dict):
        raise BaselineError(path, "missing or invalid 'concurrency' section (expected an object)")


def _check_metric(path: Path, where: str, name: str, m: Any) -> None:
    if not isinstance(m, dict):
        raise BaselineError(path, f"{where}: expected an object, got {m!r}")
    for key in ("value", "samples", "spread", "direction"):
        if key not in m:
            raise BaselineError(path, f"{where}: missing {key!r}")
    _check_keys(path, where, m, {"value", "samples", "spread", "direction", "nights"})
    if not _is_number(m["value"]):
        raise BaselineError(path, f"{where}.value must be a finite number, got {m['value']!r}")
    samples = m["samples"]
    if not isinstance(samples, list) or not samples or not all(_is_number(s) for s in samples):
        raise BaselineError(path, f"{where}.samples must be a non-empty list of numbers, got {samples!r}")
    if m["spread"] is not None and not (_is_number(m["spread"]) and m["spread"] >= 0):
        raise BaselineError(path, f"{where}.spread must be a number >= 0 or null, got {m['spread']!r}")
    try:
        direction = Direction.parse(m["direction"])
    except ValueError as exc:
        raise BaselineError(path, f"{where}.direction: {exc}") from None
    try:
        known = metric(name).direction
    except UnknownMetric as exc:
        raise BaselineError(path, f"{where}: {exc}") from None
    if direction is not known:
        raise BaselineError(path, f"{where}.direction is {direction.value!r} but {name} is {known.value}-is-better")
    median, _ = median_and_range(samples)
    if "nights" not in m:
        _check_median(path, where, m["value"], median, "its samples", "value and samples")
        return
    nights = m["nights"]
    if (
        not isinstance(nights, list)
        or not nights
        or not all(isinstance(n, dict) and set(n) == {"session", "value"} for n in nights)
        or not all(isinstance(n["session"], str) and _is_number(n["value"]) for n in nights)
    ):
        raise BaselineError(
            path, f"{where}.nights must be a non-empty list of {{session, value}}, one per recording night"
        )
    _check_median(path, f"{where}.nights[-1]", nights[-1]["value"], median, "its samples", "nights and samples")
    _check_median(
        path, where, m["value"], statistics.median(n["value"] for n in nights), "its nights' values", "value and nights"
    )


def _check_median(path: Path, where: str, value: float, median: float, of: str, together: str) -> None:
    if not math.isclose(value, median, rel_tol=1e-5, abs_tol=1e-9):
        raise BaselineError(
            path,
            f"{where}.value {value!r} is not the median of {of} ({stable_float(median)!r}); "
            f"re-record with --update-baselines, or edit {together} together",
        )


def _check_entry(path: Path, where: str, entry: Any) -> None:
    if not isinstance(entry, dict):
        raise BaselineError(path, f"{where}: expected an object, got {type(entry).__name__}")
    for section in ("workload", "provenance", "metrics"):
        if not isinstance(entry.get(section), dict):
            raise BaselineError(path, f"{where}: missing or invalid {section!r} (expected an object)")
    _check_keys(path, where, entry, {"workload", "provenance", "metrics", "requests", "outputs"})
    for name, m in entry["metrics"].items():
        _check_metric(path, f"{where}.metrics.{name}", name, m)
    if "requests" in entry:
        if not isinstance(entry["requests"], list):
            raise BaselineError(
                path, f"{where}.requests must be a list of lines, got {type(entry['requests']).__name__}"
            )
        try:
            decode_rows(entry["requests"])
        except ValueError as exc:
            raise BaselineError(path, f"{where}.requests: {exc}") from None
    if "outputs" in entry:
        if not isinstance(entry["outputs"], list):
            raise BaselineError(path, f"{where}.outputs must be a list of lines, got {type(entry['outputs']).__name__}")
        try:
            decode_outputs(entry["outputs"])
        except ValueError as exc:
            raise BaselineError(path, f"{where}.outputs: {exc}") from None


def entries_of(path: Path, doc: dict[str, Any]) -> dict[int, dict[str, dict[str, Any]]]:
    """The file's entries by concurrency and workload key, each checked."""
    entries: dict[int, dict[str, dict[str, Any]]] = {}
    for level, section in doc["concurrency"].items():
        concurrency = _concurrency_key(path, level)
        if doc["format"] == 1:  # one entry per concurrency: its workload gives its key
            _check_entry(path, f"concurrency[{level}]", section)
            entries[concurrency] = {workload_key(section["workload"]): section}
            continue
        if not isinstance(section, dict) or not section:
            raise BaselineError(
                path, f"concurrency[{level}]: expected an object of entries by workload key, got {section!r}"
            )
        for key, entry in section.items():
            where = f"concurrency[{level}][{key!r}]"
            _check_entry(path, where, entry)
            expected = workload_key(entry["workload"])
            if key != expected:
                raise BaselineError(
                    path,
                    f"{where}: the key does not match the entry's workload, whose key is {expected!r}; "
                    "rename the key (or fix the workload) by hand, or delete the entry and re-record it "
                    "with --update-baselines",
                )
        entries[concurrency] = dict(section)
    return entries


def published_entries(path: Path, doc: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A published file's entries by concurrency, each checked: its figures and their source."""
    entries: dict[int, dict[str, Any]] = {}
    for key, entry in doc["concurrency"].items():
        where = f"concurrency[{key}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("figures"), dict):
            raise BaselineError(path, f"{where}: expected an object with a 'figures' object")
        _check_keys(path, where, entry, {"figures", "source", "note"})
        if not isinstance(entry.get("source"), str) or not entry["source"].strip():
            raise BaselineError(path, f"{where}: missing 'source' (where the figures were published)")
        for name, v in entry["figures"].items():
            if not _is_number(v):
                raise BaselineError(path, f"{where}.figures.{name} must be a finite number, got {v!r}")
        entries[_concurrency_key(path, key)] = entry
    return entries
