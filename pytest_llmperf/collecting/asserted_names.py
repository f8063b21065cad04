"""The literal metric names a performance test asserts, checked at collection: a typo is
found before any server starts, not after the runs."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

from pytest_llmperf.metrics.registry import is_known, unknown_message

GATES = ("assert_no_regression",)  # gated names: every positional argument, and tolerances= keys


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_run_call(node: ast.AST, fixture: str) -> bool:
    """`fixture.run(...)`: what gives a MeasuredRun."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == fixture
    )


def _names_in_call(call: ast.Call, runs: set[str], fixture: str) -> Iterator[tuple[str, str]]:
    """(method, literal name) for a call that asserts or reads metrics of a run."""
    if not isinstance(call.func, ast.Attribute):
        return
    method, receiver = call.func.attr, call.func.value
    if method in GATES:
        for arg in call.args:
            if (name := _literal(arg)) is not None:
                yield method, name
        for keyword in call.keywords:
            if keyword.arg == "tolerances" and isinstance(keyword.value, ast.Dict):
                for key in keyword.value.keys:
                    if key is not None and (name := _literal(key)) is not None:
                        yield f"{method}: tolerances", name
    elif method == "value" and len(call.args) == 1 and not call.keywords:
        # Only on a run: other objects have methods called value too.
        if (isinstance(receiver, ast.Name) and receiver.id in runs) or _is_run_call(receiver, fixture):
            if (name := _literal(call.args[0])) is not None:
                yield method, name


def unknown_names(source: str, fixture: str = "llmperf") -> list[tuple[int, str]]:
    """(line, message) for each literal metric name the registry does not know."""
    tree = ast.parse(textwrap.dedent(source))
    runs = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and _is_run_call(node.value, fixture)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    calls = sorted(
        (node for node in ast.walk(tree) if isinstance(node, ast.Call)), key=lambda n: (n.lineno, n.col_offset)
    )
    return [
        (call.lineno, unknown_message(name, f"{method}: "))
        for call in calls
        for method, name in _names_in_call(call, runs, fixture)
        if not is_known(name)
    ]


@functools.lru_cache(maxsize=256)  # one parse per function, however many parameters it runs with
def check_function(function: Callable[..., Any]) -> list[tuple[int, str]]:
    """`unknown_names` of a test function, with lines counted in its file; nothing when
    its source cannot be read (then the call checks when it runs)."""
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        return []
    try:
        found = unknown_names("".join(lines))
    except SyntaxError:
        return []
    return [(first + line - 1, message) for line, message in found]
