"""pytest-llmperf: performance regression tests for LLM serving."""

__version__ = "0.1.0"

from pytest_llmperf.servers.spec import ServerSpec  # noqa: E402

__all__ = ["ServerSpec", "__version__"]
