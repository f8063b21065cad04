"""String constants in the package equal to a registered metric's name, outside the
registry (metrics/registry.py), the summary that fills its fields (metrics/summary.py)
and the simulator (sim/): each is a place that knows a metric by name instead of asking
the registry's row.

    python scripts/metric_literals.py [REPO]     # per module, then the total
    python scripts/metric_literals.py -v [REPO]  # every literal with its line
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXEMPT = ("metrics/registry.py", "metrics/summary.py")


def registered_names(repo: Path) -> set[str]:
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    from pytest_llmperf.metrics.registry import METRICS

    return set(METRICS)


def literals(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, value) of every string constant in `path` equal to one of `names`."""
    tree = ast.parse(path.read_text())
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    )


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    repo = Path(args[0]).resolve() if args else ROOT
    package = repo / "pytest_llmperf"
    names = registered_names(repo)
    total = modules = 0
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("sim/") or rel in EXEMPT:
            continue
        found = literals(path, names)
        if not found:
            continue
        total += len(found)
        modules += 1
        print(f"{len(found):4d}  {rel}")
        if verbose:
            for line, value in found:
                print(f"        {line}: {value!r}")
    print(f"{total:4d}  literals in {modules} modules")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
