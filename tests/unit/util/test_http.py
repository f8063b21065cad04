"""util.http: base URLs, GET /version and GET /metrics."""

import asyncio

import httpx
import pytest

from pytest_llmperf.util.http import PageError, fetch_metrics_page, fetch_version, server_root


@pytest.mark.parametrize(
    "url, root",
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/v1", "http://h:8000"),
        ("https://h/v1/", "https://h"),
        ("http://h/proxy", "http://h/proxy"),
    ],
)
def test_server_root(url, root):
    assert server_root(url) == root


@pytest.mark.parametrize("url", ["", "h:8000", "ftp://h"])
def test_server_root_refuses_what_is_not_http(url):
    with pytest.raises(ValueError, match=r"expected an http\(s\):// URL"):
        server_root(url)


def client(routes):
    def handler(request: httpx.Request) -> httpx.Response:
        status, body = routes.get(request.url.path, (404, b"{}"))
        return httpx.Response(status, content=body)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_fetch_version_reads_the_version_and_says_why_not():
    assert fetch_version("http://s", client=client({"/version": (200, b'{"version": "0.32.0"}')})) == "0.32.0"
    for routes in ({}, {"/version": (200, b"[]")}, {"/version": (200, b"{}")}, {"/version": (200, b"x")}):
        with pytest.raises(PageError, match=r"GET http://s/version failed"):
            fetch_version("http://s", client=client(routes))


def test_fetch_metrics_page_is_none_without_a_page(monkeypatch):
    pages = {"/metrics": (200, b"vllm:x_total 1\n")}
    real = httpx.AsyncClient

    def fake(**kw):
        async def handler(request):
            status, body = pages.get(request.url.path, (404, b""))
            return httpx.Response(status, content=body)

        return real(transport=httpx.MockTransport(handler), **kw)

    monkeypatch.setattr(httpx, "AsyncClient", fake)
    assert asyncio.run(fetch_metrics_page("http://s")) == "vllm:x_total 1\n"
    pages.clear()
    assert asyncio.run(fetch_metrics_page("http://s")) is None


def test_fetch_metrics_page_is_none_when_nothing_answers():
    assert asyncio.run(fetch_metrics_page("http://127.0.0.1:1", timeout=1.0)) is None
