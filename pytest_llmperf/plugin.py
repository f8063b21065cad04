"""pytest hooks for pytest-llmperf (options, markers, fixtures, summary)."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "llmperf(server=..., **workload): a performance test against a declared server",
    )
