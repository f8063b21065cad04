"""The streaming client against a scripted server: records, payloads and every failure mode."""

import asyncio
import socket

import pytest

from pytest_llmperf.workload.client import StreamingClient, build_payload, error_message
from pytest_llmperf.workload.http1 import ConnectionPool
from pytest_llmperf.workload.requests import SampledRequest
from tests.unit.workload.stream_fakes import FakeStreamServer


@pytest.fixture
def server():
    with FakeStreamServer() as srv:
        yield srv


def _req(prompt, index=0):
    return SampledRequest(index=index, prompt=prompt, prompt_len=7, expected_output_len=5)


def _run(base_url, prompts, **kw):
    async def main():
        async with StreamingClient(base_url, "m", **kw) as client:
            return await asyncio.gather(*(client.request(_req(p, i)) for i, p in enumerate(prompts)))

    return asyncio.run(main())


def test_multi_token_chunks_counts_come_from_usage(server):
    (rec,) = _run(server.base_url, ["ok n=10 k=3"])
    assert rec.ok, rec.error
    assert rec.status == 200
    assert rec.completion_tokens == 10  # usage, though only 4 chunks arrived
    assert len(rec.chunk_times) == 4
    assert rec.output_text == "".join(f" t{i}" for i in range(10))
    assert rec.finish_reason == "length"
    assert rec.prompt_tokens == len("ok n=10 k=3") // 4 + 1
    assert rec.send_time < rec.chunk_times[0] <= rec.chunk_times[-1] <= rec.end_time
    assert rec.index == 0 and rec.expected_prompt_len == 7


def test_chat_endpoint_times_role_and_final_chunks_as_vllm(server):
    (rec,) = _run(server.base_url, ["ok n=4"], endpoint="chat")
    assert rec.ok, rec.error
    # the role-only chunk, 4 content chunks, the empty chunk with finish_reason
    assert len(rec.chunk_times) == 6 and rec.completion_tokens == 4
    assert rec.ttft == rec.chunk_times[0] - rec.send_time and rec.e2el == rec.chunk_times[-1] - rec.send_time
    sent = server.requests[0]
    assert sent["messages"] == [{"role": "user", "content": "ok n=4"}]
    assert sent["max_completion_tokens"] == 256 and "max_tokens" not in sent


def test_stream_without_any_choices_chunk_fails(server):
    (rec,) = _run(server.base_url, ["ok n=0"])  # only usage and [DONE]
    assert not rec.ok and rec.error == "stream carried no token chunk (none with non-empty choices)"
    assert rec.chunk_times == [] and rec.completion_tokens == 0


def test_payload_and_headers(server):
    _run(server.base_url, ["ok"], max_tokens=17, ignore_eos=True, api_key="sekret")
    sent = server.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert sent["temperature"] == 0 and sent["max_tokens"] == 17 and sent["ignore_eos"] is True
    assert sent["model"] == "m" and sent["prompt"] == "ok"
    assert sent["headers"]["authorization"] == "Bearer sekret"


def test_no_ignore_eos_or_auth_unless_asked(server):
    _run(server.base_url, ["ok"])
    sent = server.requests[0]
    assert "ignore_eos" not in sent and "authorization" not in sent["headers"]


def test_chunk_times_track_server_send_times(server):
    # 20 ms apart: a few ms of scheduling noise on a busy machine stays well under 2 %
    (rec,) = _run(server.base_url, ["ok n=16 dt=0.02"])
    truth = server.requests[0]["send_times"]
    assert len(truth) == len(rec.chunk_times) == 16
    lags = [c - s for c, s in zip(rec.chunk_times, truth)]
    assert all(0 <= lag < 0.05 for lag in lags), lags
    # TPOT agrees with the server's own to well under 2 %.
    server_tpot = (truth[-1] - truth[0]) / 15
    assert rec.tpot == pytest.approx(server_tpot, rel=0.02)


@pytest.mark.parametrize(
    "prompt, expected",
    [
        ("http500", "HTTP 500: scripted failure 500"),
        ("http404", "HTTP 404: scripted failure 404"),
        ("malformed n=5", 'malformed SSE line: \'{"oops": "no data field"}\''),
        ("badjson n=5", "malformed SSE data (not JSON): '{not json'"),
        ("nodone n=3", "stream ended without [DONE]"),
        ("nousage n=3", "no usage chunk (server ignored stream_options.include_usage)"),
        ("close n=5", "connection closed by server mid-response"),
    ],
)
def test_failures_are_recorded_not_raised(server, prompt, expected):
    recs = _run(server.base_url, [prompt, "ok n=3"])
    assert recs[0].error is not None and recs[0].error.startswith(expected), recs[0].error
    assert recs[1].ok, recs[1].error  # the other request is unaffected


def test_http_error_status_is_kept(server):
    (rec,) = _run(server.base_url, ["http503"])
    assert rec.status == 503 and not rec.ok and rec.chunk_times == []


def test_stall_hits_read_timeout(server):
    (rec,) = _run(server.base_url, ["stall n=5"], read_timeout=0.3)
    assert rec.error == "read timeout after 0.3 s without data"
    assert len(rec.chunk_times) == 2  # raw data before the stall is kept; still a failure
    assert rec.end_time - rec.send_time < 2


def test_unreachable_port_is_a_recorded_failure():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (rec,) = _run(f"http://127.0.0.1:{port}", ["ok"], connect_timeout=1)
    assert rec.error is not None and rec.error.startswith(f"cannot connect to 127.0.0.1:{port}")


def test_keep_alive_reuses_one_connection(server):
    async def main():
        async with StreamingClient(server.base_url, "m") as client:
            return [await client.request(_req("ok n=3", i)) for i in range(5)]

    recs = asyncio.run(main())
    assert all(r.ok for r in recs)
    assert server.connections == 1


def test_cut_all_records_reason_for_every_flight(server):
    async def main():
        async with StreamingClient(server.base_url, "m") as client:
            tasks = [asyncio.ensure_future(client.request(_req("stall n=5", i))) for i in range(3)]
            await asyncio.sleep(0.2)
            client.cut_all("cut at grace period")
            return await asyncio.gather(*tasks)

    recs = asyncio.run(main())
    assert [r.error for r in recs] == ["cut at grace period"] * 3


def test_build_payload_rejects_unknown_endpoint():
    with pytest.raises(ValueError, match="endpoint must be one of"):
        build_payload("m", "p", "embeddings", 5)


def test_bad_base_url_is_rejected():
    with pytest.raises(ValueError, match="base_url must look like"):
        StreamingClient("localhost:8000", "m")


def test_error_message_shapes():
    assert error_message(404, "Not Found", b'{"detail":"Not Found"}') == "HTTP 404: Not Found"
    assert error_message(502, "Bad Gateway", b"<html>oops</html>") == "HTTP 502: <html>oops</html>"
    assert error_message(500, "Internal", b"") == "HTTP 500: Internal"


def test_stream_defers_decoding_until_finish(server):
    async def main():
        async with StreamingClient(server.base_url, "m") as client:
            return await client.stream(_req("ok n=7 k=2"))

    pending = asyncio.run(main())
    assert pending.record.chunk_times == [] and pending.record.completion_tokens is None
    assert not pending.failed_hint and pending.completion_tokens_hint == 7
    rec = pending.finish()
    assert rec.ok and rec.completion_tokens == 7 and len(rec.chunk_times) == 4
    assert pending.finish() is rec and rec.completion_tokens == 7  # finishing twice is harmless


class BrokenPool(ConnectionPool):
    async def acquire(self, fresh=False):
        raise RuntimeError("boom")


def test_an_unexpected_client_exception_is_a_failed_record(server):
    (rec,) = _run(server.base_url, ["ok"], connections=BrokenPool)
    assert rec.error == "client error: RuntimeError: boom"
