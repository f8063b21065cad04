"""SSE splitting and chunk decoding on the exact bytes vLLM 0.32 sent (reference capture)."""

import pytest

from pytest_llmperf.workload.sse import SSESplitter, decode_events

# Verbatim chunks from vLLM 0.32.0 (CPU, ngram speculation): completions with a
# multi-token chunk, chat with the role-only first chunk, usage with empty choices.
COMPLETIONS = (
    b'data: {"id":"cmpl-9e7f","object":"text_completion","created":1796012019,"model":"smollm2","choices":[{"index":0,"text":" one","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n'
    b'data: {"id":"cmpl-9e7f","object":"text_completion","created":1796012019,"model":"smollm2","choices":[{"index":0,"text":" two four","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n'
    b'data: {"id":"cmpl-9e7f","object":"text_completion","created":1796012019,"model":"smollm2","choices":[{"index":0,"text":" three, one two","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}\n\n'
    b'data: {"id":"cmpl-9e7f","object":"text_completion","created":1796012019,"model":"smollm2","choices":[],"usage":{"prompt_tokens":19,"total_tokens":25,"completion_tokens":6},"system_fingerprint":"vllm-0.32.0-3054a22d"}\n\n'
    b"data: [DONE]\n\n"
)
CHAT = (
    b'data: {"id":"chatcmpl-82f6","object":"chat.completion.chunk","created":1796012022,"model":"smollm2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}\n\n'
    b'data: {"id":"chatcmpl-82f6","object":"chat.completion.chunk","created":1796012022,"model":"smollm2","choices":[{"index":0,"delta":{"content":"1"},"logprobs":null,"finish_reason":null,"token_ids":null}]}\n\n'
    b'data: {"id":"chatcmpl-82f6","object":"chat.completion.chunk","created":1796012022,"model":"smollm2","choices":[{"index":0,"delta":{"content":". Red"},"logprobs":null,"finish_reason":null,"token_ids":null}]}\n\n'
    b'data: {"id":"chatcmpl-82f6","object":"chat.completion.chunk","created":1796012022,"model":"smollm2","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}\n\n'
    b'data: {"id":"chatcmpl-82f6","object":"chat.completion.chunk","created":1796012022,"model":"smollm2","choices":[],"usage":{"prompt_tokens":34,"total_tokens":37,"completion_tokens":3},"system_fingerprint":"vllm-0.32.0-3054a22d"}\n\n'
    b"data: [DONE]\n\n"
)


def _feed_in_pieces(raw: bytes, size: int) -> SSESplitter:
    sp = SSESplitter()
    for i in range(0, len(raw), size):
        sp.feed(raw[i : i + size], float(i))  # the "time" is the offset the piece started at
    sp.finish(float(len(raw)))
    return sp


@pytest.mark.parametrize("size", [1, 7, 100, 10_000])
def test_completions_stream_any_split(size):
    sp = _feed_in_pieces(COMPLETIONS, size)
    assert sp.error is None and sp.done_time is not None
    d = decode_events(sp.events)
    assert d.error is None
    assert "".join(d.text_parts) == " one two four three, one two"
    assert len(d.chunk_times) == 3  # three text chunks, six tokens
    assert d.completion_tokens == 6 and d.prompt_tokens == 19  # from usage, not chunks
    assert d.finish_reason == "length"


def test_chunk_time_is_arrival_of_the_events_last_byte():
    sp = _feed_in_pieces(COMPLETIONS, 50)
    first_end = COMPLETIONS.index(b"\n\n") + 2
    d = decode_events(sp.events)
    # The first event is complete in the piece that holds its blank line.
    assert d.chunk_times[0] == float((first_end - 1) // 50 * 50)


def test_chat_role_chunk_and_empty_final_chunk_do_not_count():
    sp = _feed_in_pieces(CHAT, 33)
    d = decode_events(sp.events)
    assert len(d.chunk_times) == 2
    assert "".join(d.text_parts) == "1. Red"
    assert d.finish_reason == "stop" and d.completion_tokens == 3


def test_crlf_comments_and_named_events_are_accepted():
    raw = COMPLETIONS.replace(b"\n", b"\r\n")
    raw = b": ping\r\n\r\nevent: message\r\n" + raw
    sp = _feed_in_pieces(raw, 13)
    assert sp.error is None
    assert decode_events(sp.events).completion_tokens == 6


def test_malformed_line_is_reported_with_its_text():
    sp = _feed_in_pieces(b'data: {"choices":[]}\n\n{"oops": 1}\n\ndata: [DONE]\n\n', 5)
    assert sp.error is not None and sp.error.startswith("malformed SSE line") and "oops" in sp.error


def test_data_that_is_not_json_is_reported():
    sp = _feed_in_pieces(b"data: {not json\n\ndata: [DONE]\n\n", 4)
    d = decode_events(sp.events)
    assert d.error is not None and "not JSON" in d.error and "{not json" in d.error


def test_error_event_in_stream_is_a_failure():
    sp = _feed_in_pieces(b'data: {"error": {"message": "engine dead", "code": 500}}\n\n', 9)
    assert decode_events(sp.events).error == "error event in stream: engine dead"


def test_data_after_done_is_an_error():
    sp = _feed_in_pieces(b"data: [DONE]\n\ndata: {}\n\n", 100)
    assert sp.error is not None and "after [DONE]" in sp.error


def test_missing_done_leaves_done_time_unset():
    sp = _feed_in_pieces(COMPLETIONS[: COMPLETIONS.index(b"data: [DONE]")], 64)
    assert sp.done_time is None and len(sp.events) == 4
