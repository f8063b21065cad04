"""What a running server says about itself, for results and baselines."""

from __future__ import annotations

from typing import Any

import httpx

from pytest_llmperf.util.http import PageError, fetch_version


def server_provenance(base_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """vLLM's version from GET /version (absent: "unknown"), and max_model_len from /v1/models."""
    info: dict[str, Any] = {"vllm_version": "unknown"}
    try:
        with httpx.Client(timeout=timeout) as client:
            try:
                info["vllm_version"] = fetch_version(base_url, client=client)
            except PageError:
                pass
            models = client.get(f"{base_url}/v1/models")
            if models.status_code == 200:
                data = models.json().get("data") or [{}]
                if "max_model_len" in data[0]:
                    info["max_model_len"] = data[0]["max_model_len"]
    except (httpx.HTTPError, ValueError):
        pass  # provenance is best effort; the run itself reports reachability
    return info
