"""Batches the store could not take, kept as files until `llmperf store push` (or the next
session against the same store) writes them: one JSON file per session, moved under
`pushed/` once written. Writing a batch twice adds nothing (its rows are keyed)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.util.files import atomic_write_text

SPOOL_DIR = "store-spool"
PUSHED_DIR = "pushed"


def spool_folder(report: str | None, rootdir: Path) -> Path:
    """In the session's report folder (beside a `.json` report), else `.llmperf/` under the
    rootdir."""
    if report:
        path = rootdir / report
        return (path.parent if path.suffix == ".json" else path) / SPOOL_DIR
    return rootdir / ".llmperf" / SPOOL_DIR


def spool(batch: Mapping[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{batch['session']['id']}.json"
    atomic_write_text(path, json.dumps(batch, sort_keys=True))
    return path


def pending(folder: Path) -> list[Path]:
    """The spooled batches not yet pushed, under `folder` or its store-spool/ subfolder."""
    if folder.name != SPOOL_DIR and (folder / SPOOL_DIR).is_dir():
        folder = folder / SPOOL_DIR
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@dataclass
class Pushed:
    batches: int = 0
    rows: int = 0
    problems: list[str] = field(default_factory=list)


def push(folder: Path, write: Callable[[Mapping[str, Any]], int]) -> Pushed:
    """Write every pending batch with `write` (the store's write_batch) and move it under
    pushed/; a batch that fails stays for the next push."""
    done = Pushed()
    for path in pending(folder):
        try:
            batch = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            done.problems.append(f"{path}: not a spooled batch: {exc}")
            continue
        done.rows += write(batch)
        done.batches += 1
        (path.parent / PUSHED_DIR).mkdir(exist_ok=True)
        path.replace(path.parent / PUSHED_DIR / path.name)
    return done
