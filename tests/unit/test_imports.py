"""Import rules of the package, read from its source: no private names across modules,
`util` at the bottom (it imports nothing of ours), `sim` self-contained."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_llmperf"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, imported names) of every import of ours in `path`, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pytest_llmperf"):
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names if a.name.startswith("pytest_llmperf")]
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_relative_imports_are_not_used():
    relative = [
        f"{p.relative_to(PACKAGE)}:{n.lineno}"
        for p in SOURCES
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.ImportFrom) and n.level
    ]
    assert relative == []  # the rules below read absolute imports only


def test_no_module_imports_a_private_name_of_another():
    found = [
        f"{p.relative_to(PACKAGE)}:{line}: {module} import {name}"
        for p in SOURCES
        for line, module, names in _imports(p)
        for name in [*names, *module.split(".")]
        if _private(name)
    ]
    assert found == []


@pytest.mark.parametrize("layer, allowed", [("util", "pytest_llmperf.util"), ("sim", "pytest_llmperf.sim")])
def test_bottom_layers_import_only_themselves(layer, allowed):
    found = [
        f"{p.relative_to(PACKAGE)}:{line}: {module}"
        for p in sorted((PACKAGE / layer).rglob("*.py"))
        for line, module, _ in _imports(p)
        if module != allowed and not module.startswith(allowed + ".")
    ]
    assert found == []
