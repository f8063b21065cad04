"""The hooks pytest-llmperf adds to pytest (specifications; a conftest.py implements them).

# conftest.py
def pytest_llmperf_servers():
    return [QWEN36_27B, QWEN36_27B_MTP]

def pytest_llmperf_target_kinds():  # chosen with --llmperf-target slurm
    return [TargetKind("slurm", build_slurm_target, baseline_folder="slurm")]
"""

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
    """The servers a test may name in `@pytest.mark.llmperf(server="NAME", base="NAME")`.

    A test sees the servers of the conftest.py files above it (from the rootdir down)
    and of installed plugins; one name means one ServerSpec, and `--llmperf-servers`
    matches its patterns against these names. The `config` argument may be left out.
    With the plugin disabled (`-p no:llmperf`) pytest reports an implementation as an
    unknown hook: a conftest.py that must load without the plugin marks it
    `@pytest.hookimpl(optionalhook=True)`.
    """


@pytest.hookspec
def pytest_llmperf_target_kinds(config: pytest.Config) -> Iterable[TargetKind]:  # type: ignore[empty-body]
    """Target kinds to add to the built-in ones (kinds.py), each chosen with
    `--llmperf-target NAME` (ini `llmperf_target`); a kind named as a built-in one
    replaces it. Called once, at configure: implement it in the rootdir's conftest.py
    or in an installed plugin."""


@pytest.hookspec(firstresult=True)
def pytest_llmperf_make_target(
    config: pytest.Config, options: LlmperfOptions, kind: TargetKind, context: TargetContext
) -> ServerTarget | None:
    """The session's ServerTarget for the chosen `kind`, or None to leave it to the next
    implementation. The plugin's own implementation runs last and calls `kind.factory`;
    a conftest.py returns a target here to build a kind (a built-in one too) its own way.
    `context`: the session id, a progress callback, and each server's GPU slot and
    Docker engine under --llmperf-gpus."""
