"""SSE splitting and chunk decoding on the exact bytes vLLM 0.32 sent (reference capture)."""

import json

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


def test_chat_role_chunk_and_empty_final_chunk_count_as_vllm_counts_them():
    # vLLM's bench: every chunk with non-empty choices is a token event, the role-only
    # first chunk and the empty-text chunk with finish_reason included; usage is not.
    sp = _feed_in_pieces(CHAT, 33)
    d = decode_events(sp.events)
    ends = [i + 2 for i in range(len(CHAT)) if CHAT.startswith(b"\n\n", i)]
    # role, "1", ". Red", the empty stop chunk: each timed by the piece holding its end
    assert d.chunk_times == [float((end - 1) // 33 * 33) for end in ends[:4]]
    assert "".join(d.text_parts) == "1. Red"
    assert d.finish_reason == "stop" and d.completion_tokens == 3


def _events(*objs):
    """Decoded-stream input: (arrival time, JSON payload), one second apart from t=1."""
    return [(float(i + 1), json.dumps(o).encode()) for i, o in enumerate(objs)]


USAGE_1 = {"choices": [], "usage": {"prompt_tokens": 9, "total_tokens": 10, "completion_tokens": 1}}


def test_eos_only_completion_is_one_token_chunk():
    # A reply that is one EOS token: empty text, finish_reason stop, usage 1 (vLLM 0.32).
    d = decode_events(_events({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}, USAGE_1))
    assert d.error is None
    assert d.chunk_times == [1.0]  # the usage chunk at t=2 is not a token chunk
    assert d.text_parts == [] and d.finish_reason == "stop"
    assert (d.prompt_tokens, d.completion_tokens) == (9, 1)


def test_eos_only_chat_reply_counts_the_role_chunk_and_the_eos_chunk():
    d = decode_events(
        _events(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}]},
            USAGE_1,
        )
    )
    assert d.chunk_times == [1.0, 2.0] and d.text_parts == [] and d.completion_tokens == 1


def test_final_empty_chunk_is_the_last_token_chunk():
    d = decode_events(
        _events(
            {"choices": [{"index": 0, "text": " a", "finish_reason": None}]},
            {"choices": [{"index": 0, "text": " b", "finish_reason": None}]},
            {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]},
            {**USAGE_1, "usage": {"prompt_tokens": 9, "total_tokens": 12, "completion_tokens": 3}},
        )
    )
    assert d.chunk_times == [1.0, 2.0, 3.0]  # the EOS chunk at t=3 ends the request, not usage at t=4
    assert "".join(d.text_parts) == " a b" and d.completion_tokens == 3


def test_choice_without_text_field_still_counts():
    d = decode_events(_events({"choices": [{"index": 0, "finish_reason": None}]}, USAGE_1))
    assert d.chunk_times == [1.0] and d.text_parts == []


def test_usage_only_stream_has_no_token_chunk():
    d = decode_events(_events({"choices": [], "usage": None}, USAGE_1))
    assert d.chunk_times == [] and d.completion_tokens == 1


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


# Reasoning models: chat streams of a server run with `--reasoning-parser qwen3`, in the
# shapes vLLM 0.32's source writes them (DeltaMessage serialized with exclude_unset:
# `reasoning` for reasoning text, `content` for the answer, both when one speculative
# step holds the end of one and the start of the other; a step of `</think>` alone makes
# no chunk; after the reasoning each step's text passes through as `content`, the EOS
# chunk's empty one too; usage carries completion_tokens_details.reasoning_tokens).
_HEAD = b'data: {"id":"chatcmpl-5a1b","object":"chat.completion.chunk","created":1796012022,"model":"qwen3.6"'


def _chat_chunk(delta: bytes, finish: bytes = b"null", stop: bytes = b"") -> bytes:
    return (
        _HEAD
        + b',"choices":[{"index":0,"delta":'
        + delta
        + b',"logprobs":null,"finish_reason":'
        + finish
        + stop
        + b',"token_ids":null}]}\n\n'
    )


def _reasoning_stream(field: bytes) -> bytes:
    return (
        _HEAD
        + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
        + b'"prompt_token_ids":null,"prompt_text":null}\n\n'
        + _chat_chunk(b'{"' + field + b'":"Okay, the user"}')
        + _chat_chunk(b'{"' + field + b'":" wants colours."}')
        + _chat_chunk(b'{"content":"\\n\\nRed","' + field + b'":" Done."}')
        + _chat_chunk(b'{"content":", blue."}')
        + _chat_chunk(b'{"content":""}', b'"stop"', b',"stop_reason":null')
        + _HEAD
        + b',"choices":[],"usage":{"prompt_tokens":14,"total_tokens":40,"completion_tokens":26,'
        + b'"completion_tokens_details":{"reasoning_tokens":19}},"system_fingerprint":"vllm-0.32.0-3054a22d"}\n\n'
        + b"data: [DONE]\n\n"
    )


@pytest.mark.parametrize("field", [b"reasoning", b"reasoning_content"])  # vLLM 0.32; before #27752
def test_reasoning_stream_ttft_is_the_first_chunk_and_ttfa_the_first_answer_text(field):
    raw = _reasoning_stream(field)
    sp = _feed_in_pieces(raw, 29)
    d = decode_events(sp.events)
    assert d.error is None
    ends = [i + 2 for i in range(len(raw)) if raw.startswith(b"\n\n", i)]
    times = [float((end - 1) // 29 * 29) for end in ends]
    # role, two reasoning chunks, reasoning + answer, answer, the EOS chunk: six token chunks
    assert d.chunk_times == times[:6]
    assert d.first_answer_time == times[3] > d.chunk_times[0]  # TTFT stays the first chunk, as vLLM's
    assert d.reasoning_chunks == 3
    assert d.reasoning_tokens == 19 and d.completion_tokens == 26  # from usage, never from chunks
    # reasoning and answer text in stream order, the reasoning of a mixed chunk first
    assert "".join(d.text_parts) == "Okay, the user wants colours. Done.\n\nRed, blue."
    assert d.finish_reason == "stop"


def test_a_chunk_with_both_reasoning_fields_counts_once():
    # vLLM between the rename (#27752) and the old name's removal (#33402) sent both.
    d = decode_events(
        _events(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"choices": [{"index": 0, "delta": {"reasoning": "Hmm", "reasoning_content": "Hmm"}}]},
            {"choices": [{"index": 0, "delta": {"content": "Yes", "reasoning": None, "reasoning_content": None}}]},
            {"choices": [], "usage": {"prompt_tokens": 5, "total_tokens": 9, "completion_tokens": 4}},
        )
    )
    assert d.text_parts == ["Hmm", "Yes"] and d.reasoning_chunks == 1
    assert d.first_answer_time == 3.0 and d.chunk_times == [1.0, 2.0, 3.0]
    assert d.reasoning_tokens is None  # this usage did not count them


def test_reply_cut_in_its_reasoning_has_no_answer_time():
    # max_tokens reached before </think>: the last chunk is reasoning with finish_reason length
    d = decode_events(
        _events(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"choices": [{"index": 0, "delta": {"reasoning": "First,"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {"reasoning": " think"}, "finish_reason": "length"}]},
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 5,
                    "total_tokens": 9,
                    "completion_tokens": 4,
                    "completion_tokens_details": {"reasoning_tokens": 4},
                },
            },
        )
    )
    assert d.first_answer_time is None and d.reasoning_chunks == 2 and d.reasoning_tokens == 4
    assert d.chunk_times == [1.0, 2.0, 3.0] and d.finish_reason == "length"


def test_plain_chat_has_answer_time_and_no_reasoning():
    d = decode_events(_feed_in_pieces(CHAT, 64).events)
    assert d.first_answer_time == d.chunk_times[1]  # "1", after the empty role chunk
    assert d.reasoning_chunks == 0 and d.reasoning_tokens is None


@pytest.mark.parametrize(
    "details", [None, {}, {"reasoning_tokens": None}, {"reasoning_tokens": "7"}, {"reasoning_tokens": -1}, 3]
)
def test_usage_without_a_reasoning_count_reads_as_unknown(details):
    usage = {"prompt_tokens": 5, "total_tokens": 6, "completion_tokens": 1, "completion_tokens_details": details}
    d = decode_events(
        _events({"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}, {"choices": [], "usage": usage})
    )
    assert d.error is None and d.reasoning_tokens is None and d.completion_tokens == 1
