"""A server's base URL, and the pages read off the hot path with httpx: `/version`, `/metrics`."""

from __future__ import annotations

import argparse

import httpx

from pytest_llmperf.util.secrets import has_userinfo, redact_url


class PageError(RuntimeError):
    """A server page could not be read; the message says which and why."""


def server_root(url: str) -> str:
    """The server root: "http://h:8000/v1/" -> "http://h:8000"; ValueError unless an http(s)
    URL without credentials (requests would not carry them, logs would show them)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"expected an http(s):// URL, got {redact_url(str(url))!r}")
    if has_userinfo(url):
        raise ValueError(
            f"credentials in a server URL are not supported ({redact_url(url)}): the requests "
            "would not carry them and logs would show them; give the URL without user:password@"
        )
    return url.rstrip("/").removesuffix("/v1")


def url_argument(text: str) -> str:
    """`server_root` as an argparse type: its message, never the text typed."""
    try:
        return server_root(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def fetch_version(base_url: str, *, timeout: float = 5.0, client: httpx.Client | None = None) -> str:
    """vLLM's version from `GET {base_url}/version`; PageError when there is none."""
    url = f"{base_url}/version"
    try:
        answer = client.get(url) if client is not None else httpx.get(url, timeout=timeout)
        answer.raise_for_status()
        version = answer.json()["version"]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise PageError(f"GET {url} failed: {exc!r}") from exc
    return str(version)


async def fetch_metrics_page(
    base_url: str, *, timeout: float = 10.0, client: httpx.AsyncClient | None = None
) -> str | None:
    """The raw page from `GET {base_url}/metrics`, or None when the server has none or
    cannot answer. `client`: an open httpx client to reuse (a new one costs milliseconds)."""
    try:
        if client is not None:
            answer = await client.get(f"{base_url}/metrics")
        else:
            async with httpx.AsyncClient(timeout=timeout) as own:
                answer = await own.get(f"{base_url}/metrics")
    except httpx.HTTPError:
        return None
    return answer.text if answer.status_code == 200 else None
