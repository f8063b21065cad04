"""A server someone else runs: it answers /version."""

from __future__ import annotations

from pytest_llmperf.doctor_checks.check import FAIL, OK, Check


def check_external(base_url: str, timeout: float) -> Check:
    from pytest_llmperf.util.http import PageError, fetch_version

    try:
        version = fetch_version(base_url, timeout=timeout)
    except PageError as exc:
        return Check("server", FAIL, f"{base_url} does not answer /version: {exc}", "start the server, or fix the URL")
    return Check("server", OK, f"{base_url} answers: vLLM {version}")
