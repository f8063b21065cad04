"""The package's structural measures, as issue 29 states them: lines, the largest classes
and functions (over 300 and 80 lines), tests that assign or patch a private name of the
package, and target-kind name comparisons outside the kind registry and the simulator.

    python scripts/code_measures.py [REPO]
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

KIND_NAMES = ("sim", "docker", "gpu", "real-cpu", "local", "external")
# Tables of data, not logic: the simulator's profiles and flags.
DATA_TABLES = ("sim/config.py", "sim/calibration.py")


def units(path: Path) -> list[tuple[str, str, int]]:
    """(kind, qualified name, lines) of every class and function in `path`."""
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                size = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append(("class" if isinstance(child, ast.ClassDef) else "function", name, size))
                walk(child, name + ".")

    walk(ast.parse(path.read_text()), "")
    return found


def private_patches(tests: Path) -> list[str]:
    """Lines of tests that assign a private attribute (`x._name = ...`) or monkeypatch one."""
    assign = re.compile(r"\b(?!self\b)\w+\._[a-z]\w* = ")
    patch = re.compile(r"setattr\([^,]+,\s*[\"']_[a-z]")
    hits = []
    for path in sorted(tests.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if assign.search(line) or patch.search(line):
                hits.append(f"{path.relative_to(tests.parent)}:{number}: {line.strip()}")
    return hits


def kind_comparisons(package: Path) -> list[str]:
    """Comparisons of a target-kind name (== / != / in) outside kinds.py and sim/."""
    names = "|".join(re.escape(n) for n in KIND_NAMES)
    pattern = re.compile(rf"(==|!=|\bin)\s*\(?[^#\n]*[\"']({names})[\"']|[\"']({names})[\"']\s*(==|!=)")
    hits = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("sim/") or rel == "kinds.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "target" in line and pattern.search(line):
                hits.append(f"{rel}:{number}: {line.strip()}")
    return hits


def main(repo: Path) -> None:
    package = repo / "pytest_llmperf"
    files = sorted(package.rglob("*.py"))
    lines = sum(len(p.read_text().splitlines()) for p in files)
    print(f"package: {len(files)} modules, {lines} lines")
    big = []
    for path in files:
        rel = path.relative_to(package).as_posix()
        for kind, name, size in units(path):
            limit = 300 if kind == "class" else 80
            if size > limit and rel not in DATA_TABLES:
                big.append((size, f"{kind} {rel}:{name}"))
    print(f"classes over 300 lines and functions over 80 (data tables aside): {len(big)}")
    for size, what in sorted(big, reverse=True):
        print(f"  {size:5d}  {what}")
    patches = private_patches(repo / "tests")
    print(f"test lines assigning or patching a private name: {len(patches)}")
    for hit in patches:
        print(f"  {hit}")
    kinds = kind_comparisons(package)
    print(f"target-kind name comparisons outside kinds.py and sim/: {len(kinds)}")
    for hit in kinds:
        print(f"  {hit}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
