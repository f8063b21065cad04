"""The plugin's tests on the pytest and pytest-xdist versions it supports.

    nox -s "machinery(oldest)"   # the oldest supported releases (pyproject.toml's lower bounds)
    nox -s "machinery(latest)"   # the newest releases the package index serves today

Each session installs into a fresh virtual environment and runs the tests that touch
pytest's machinery: the hooks, options and ini keys, collection and ordering, markers,
xdist's workers and groups, and the plugin projects run under pytester. The whole suite
runs once, on the newest releases, as the README's test command (.ci/run).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "no"

# pyproject.toml's lower bounds, tested here.
OLDEST = ["pytest==8.0.0", "pytest-xdist==3.5.0"]
LATEST = ["--upgrade", "pytest", "pytest-xdist"]

SHOW_VERSIONS = "import pytest, xdist; print('installed: pytest', pytest.__version__, 'xdist', xdist.__version__)"

MACHINERY = [
    "tests/unit/test_plugin.py",
    "tests/unit/test_plugin_gpus.py",
    "tests/unit/test_plugin_servers.py",
    "tests/unit/test_plugin_terminal.py",
    "tests/unit/test_plugin_writes.py",
    "tests/unit/test_options.py",
    "tests/unit/collecting/test_ordering.py",
    "tests/unit/collecting/test_selection.py",
    "tests/unit/collecting/test_shard.py",
    "tests/unit/collecting/test_plan.py",
]


@nox.session
@nox.parametrize("versions", [nox.param(OLDEST, id="oldest"), nox.param(LATEST, id="latest")])
def machinery(session: nox.Session, versions: list[str]) -> None:
    session.install("-e", ".[report]", *versions)  # report: the report folder's plots
    session.run("python", "-c", SHOW_VERSIONS)
    session.run("pytest", "-p", "no:cacheprovider", "-n", "auto", *MACHINERY, *session.posargs)
