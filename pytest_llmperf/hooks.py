"""The hooks pytest-llmperf adds to pytest (specifications; a conftest.py implements them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_llmperf.kinds import TargetContext, TargetKind
    from pytest_llmperf.options import LlmperfOptions
    from pytest_llmperf.servers.base import ServerTarget
    from pytest_llmperf.servers.spec import ServerSpec


@pytest.hookspec
def pytest_llmperf_servers(config: pytest.Config) -> Iterable[ServerSpec]:  # type: ignore[empty-body]
    """The servers a test may name in `@pytest.mark.llmperf(server="NAME", base="NAME")`: those
    of the conftest.py files above it and of installed plugins. A conftest.py that must load
    without the plugin marks its implementation `@pytest.hookimpl(optionalhook=True)`.
    """


@pytest.hookspec
def pytest_llmperf_target_kinds(config: pytest.Config) -> Iterable[TargetKind]:  # type: ignore[empty-body]
    """Target kinds to add to the built-in ones (one of the same name replaces it), chosen
    with `--llmperf-target NAME`. Called once, at configure: implement it in the rootdir's
    conftest.py or an installed plugin."""


@pytest.hookspec(firstresult=True)
def pytest_llmperf_make_target(
    config: pytest.Config, options: LlmperfOptions, kind: TargetKind, context: TargetContext
) -> ServerTarget | None:
    """The session's ServerTarget for the chosen `kind`, or None to leave it to the next
    implementation (the plugin's own, last, calls `kind.factory`)."""
