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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules_of_the_package():
    grimp = pytest.importorskip("grimp")  # import-linter's graph builder (the dev extra)
    graph = grimp.build_graph("pytest_llmperf", cache_dir=None)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(edges) == []
