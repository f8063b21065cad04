"""The hooks pytest-llmperf adds to pytest (specifications; a conftest.py implements them).

# conftest.py
def pytest_llmperf_servers():
    return [QWEN36_27B, QWEN36_27B_MTP]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
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
