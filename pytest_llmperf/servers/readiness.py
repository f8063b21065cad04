"""Wait for an OpenAI-compatible server: /health answers 200, then the model is listed;
and, after a run with failed requests, tell whether it is still there."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from pytest_llmperf.servers.base import ServerStartError
from pytest_llmperf.servers.endpoint import Endpoint


def wait_until_ready(
    base_url: str,
    model: str,
    timeout: float,
    *,
    is_alive: Callable[[], str | None] = lambda: None,
    on_progress: Callable[[float, str], None] | None = None,
    poll_interval: float = 0.5,
) -> None:
    """Block until `model` is served at `base_url`. A server listing other models, or dead
    (`is_alive` returns why), fails at once; `on_progress(elapsed, status)` on every poll."""
    start = time.monotonic()
    status = "connecting"
    with httpx.Client(timeout=httpx.Timeout(5.0)) as client:
        while True:
            elapsed = time.monotonic() - start
            death = is_alive()
            if death is not None:
                raise ServerStartError(f"server exited before it was ready ({status}): {death}")
            try:
                health = client.get(f"{base_url}/health")
                if health.status_code != 200:
                    status = f"/health answered {health.status_code}"
                else:
                    models = client.get(f"{base_url}/v1/models")
                    ids = [m.get("id") for m in models.json().get("data", [])] if models.status_code == 200 else []
                    if model in ids:
                        return
                    if ids:
                        raise ServerStartError(
                            f"server at {base_url} serves {ids}, not {model!r}: check --llmperf-base-url or the "
                            "spec's model (or served_model_name)"
                        )
                    status = f"model {model!r} not listed yet (served: {ids})"
            except (httpx.TransportError, ValueError) as exc:
                status = f"not answering ({type(exc).__name__})"
            if on_progress is not None:
                on_progress(elapsed, status)
            if elapsed > timeout:
                raise ServerStartError(
                    f"server at {base_url} not ready after {timeout:g} s (--llmperf-ready-timeout): {status}"
                )
            time.sleep(poll_interval)


def why_down(endpoint: Endpoint, timeout: float = 5.0, settle: float = 2.0) -> str | None:
    """Why the server no longer serves (its process ended, or /health does not answer 200);
    None while it answers. A server found down gets `settle` s to exit, so its exit code is said."""
    status = endpoint.exit_status() if endpoint.exit_status is not None else None
    if status is not None:
        return status
    try:
        health = httpx.get(f"{endpoint.base_url}/health", timeout=timeout)
    except httpx.TransportError as exc:
        problem = f"/health does not answer ({type(exc).__name__})"
    else:
        if health.status_code == 200:
            return None
        problem = f"/health answers {health.status_code}"
    deadline = time.monotonic() + settle
    while endpoint.exit_status is not None and time.monotonic() < deadline:
        status = endpoint.exit_status()
        if status is not None:
            return status
        time.sleep(0.05)
    return problem
