"""Rewrite baseline files in the current format (format 1 -> 2: entries keyed by workload).

    python scripts/migrate_baselines.py [BASELINES_DIR ...]   (default: baselines)

The plugin reads format 1 files as they are and writes format 2 at the next record; this
rewrites them at once, so a commit shows the layout change apart from any new figures.
Each file is loaded and validated as the plugin does, then written atomically; numbers,
provenance and request lines are kept as they are. Published reference figures
(baselines/published/) have their own format and are left alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_llmperf.baselines.store import PUBLISHED_DIR, BaselineError, BaselineStore
from pytest_llmperf.util.files import atomic_write_text


def migrate(root: Path) -> list[Path]:
    store = BaselineStore(root)
    changed = []
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name == PUBLISHED_DIR:
            continue
        baseline = store.load(path.parent.name, path.stem)
        assert baseline is not None  # the glob found it
        text = baseline.to_json()
        if text != path.read_text(encoding="utf-8"):
            atomic_write_text(path, text)
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    for root in [Path(arg) for arg in argv] or [Path("baselines")]:
        try:
            changed = migrate(root)
        except BaselineError as exc:
            print(f"not migrated: {exc}", file=sys.stderr)
            return 1
        for path in changed:
            print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
