"""Loading ShareGPT files: the streaming parser, truncation recovery, bad input."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import pytest

from pytest_llmperf.workload.dataset import (
    DatasetError,
    DatasetNotFoundError,
    DatasetTruncatedWarning,
    load_sharegpt,
    read_sharegpt,
)
from pytest_llmperf.workload.json_stream import JSONArrayError, JSONArrayStream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sharegpt"


def expected_conversations(records: list[dict]) -> list[tuple[str, str, str]]:
    """(id, first turn, second turn) of records with two or more turns: what vLLM keeps."""
    return [
        (r["id"], r["conversations"][0]["value"], r["conversations"][1]["value"])
        for r in records
        if len(r["conversations"]) >= 2
    ]


def triples(convs) -> list[tuple[str, str, str]]:
    return [(c.id, c.prompt, c.completion) for c in convs]


def load_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning on a good file is a failure
        return read_sharegpt(path)


# -- good files --------------------------------------------------------------------


def test_valid_file_keeps_two_turn_conversations_and_counts_the_rest():
    path = FIXTURES / "valid.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    f = load_quietly(path)
    assert triples(f.conversations) == expected_conversations(records)
    assert f.records == len(records)
    assert f.skipped_short == sum(len(r["conversations"]) < 2 for r in records)
    assert not f.truncated
    raw = path.read_bytes()
    assert f.size_bytes == len(raw)
    assert f.sha256 == hashlib.sha256(raw).hexdigest()
    # vLLM's rule: the first turn is the prompt whatever its role
    roles = {c.id: c.prompt_role for c in f.conversations}
    assert roles["eee_1"] == "gpt"
    # record index is the position in the file, counting skipped records
    assert [c.index for c in f.conversations] == [i for i, r in enumerate(records) if len(r["conversations"]) >= 2]


def test_load_sharegpt_returns_the_conversation_list():
    assert triples(load_sharegpt(FIXTURES / "valid.json")) == triples(
        load_quietly(FIXTURES / "valid.json").conversations
    )


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64, 1 << 20])
def test_chunk_boundaries_anywhere_give_the_same_records(chunk):
    # Multi-byte UTF-8, escapes and bare numbers split across reads must not matter.
    path = FIXTURES / "valid.json"
    raw = path.read_bytes()
    records = json.loads(raw)
    got = list(JSONArrayStream(path, chunk_bytes=chunk))
    assert [v for _, _, v in got] == records
    # byte offsets point at each record's opening brace
    assert all(raw[b : b + 1] == b"{" for _, b, _ in got)
    assert [i for i, _, _ in got] == list(range(len(records)))


@pytest.mark.parametrize("chunk", [1, 3, 4096])
def test_numbers_and_literals_across_chunks(tmp_path, chunk):
    values = [1234567890, -0.5e-3, True, False, None, 'x\\u00e9"y', [1, [2, {"k": 3}]], 42]
    p = tmp_path / "values.json"
    p.write_text(json.dumps(values, indent=0), encoding="utf-8")
    assert [v for _, _, v in JSONArrayStream(p, chunk_bytes=chunk)] == values


def test_bom_and_empty_array(tmp_path):
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "valid.json").read_bytes())
    assert len(load_quietly(p).conversations) == 4
    q = tmp_path / "empty_array.json"
    q.write_text(" [ ] \n")
    f = load_quietly(q)
    assert f.conversations == [] and f.records == 0 and not f.truncated


# -- truncation ---------------------------------------------------------------------


def test_truncated_file_recovers_complete_records_with_one_warning():
    path = FIXTURES / "truncated.json"
    full = json.loads((FIXTURES / "valid.json").read_text(encoding="utf-8"))
    with pytest.warns(DatasetTruncatedWarning) as caught:
        f = read_sharegpt(path)
    truncation = [w for w in caught if issubclass(w.category, DatasetTruncatedWarning)]
    assert len(truncation) == 1
    msg = str(truncation[0].message)
    size = path.stat().st_size
    assert f"recovered {f.records} conversations" in msg
    assert f"file ends at byte {size}" in msg and "truncated mid-record" in msg
    assert str(path) in msg
    # the fixture is cut inside record 4: records 0-3 survive
    assert f.records == 4 and f.truncated and f.size_bytes == size
    assert triples(f.conversations) == expected_conversations(full[:4])


def test_every_cut_point_recovers_exactly_the_complete_records(tmp_path):
    """Cut the valid file at every byte: never an error past the opening bracket, and
    the recovered records are exactly those whose closing brace precedes the cut."""
    raw = (FIXTURES / "valid.json").read_bytes()
    records = json.loads(raw)
    # Each record's end byte, found with the stdlib decoder from its start byte.
    text = raw.decode("utf-8")
    starts = [b for _, b, _ in JSONArrayStream(FIXTURES / "valid.json")]
    ends = []
    for s in starts:
        _, n = json.JSONDecoder().raw_decode(text, len(raw[:s].decode("utf-8")))
        ends.append(len(text[:n].encode("utf-8")))
    last_bracket = raw.rindex(b"]")
    p = tmp_path / "cut.json"
    first = raw.index(b"[") + 1
    for cut in range(first, len(raw)):
        p.write_bytes(raw[:cut])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = read_sharegpt(p)
        n_warn = sum(issubclass(w.category, DatasetTruncatedWarning) for w in caught)
        if cut > last_bracket:
            assert n_warn == 0 and not f.truncated
            continue
        complete = sum(e <= cut for e in ends)
        assert n_warn == 1 and f.truncated, cut
        assert f.records == complete, cut
        assert triples(f.conversations) == expected_conversations(records[:complete]), cut


def test_cut_inside_a_multibyte_character_is_a_truncation(tmp_path):
    raw = (FIXTURES / "valid.json").read_bytes()
    at = raw.index("é".encode()) + 1  # between the two bytes of "é"
    p = tmp_path / "cut_utf8.json"
    p.write_bytes(raw[:at])
    expected = f"recovered 5 conversations; file ends at byte {at}"
    with pytest.warns(DatasetTruncatedWarning, match=expected):
        f = read_sharegpt(p)
    assert f.records == 5 and len(f.conversations) == 3


# -- bad files ---------------------------------------------------------------------


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="no such file") as e:
        read_sharegpt(tmp_path / "nope.json")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("content", [b"", b"  \n\t "])
def test_empty_file(tmp_path, content):
    p = tmp_path / "empty.json"
    p.write_bytes(content)
    with pytest.raises(DatasetError, match="file is empty") as e:
        read_sharegpt(p)
    assert str(p) in str(e.value)


def test_empty_fixture_names_the_file():
    with pytest.raises(DatasetError, match=r"empty\.json: file is empty"):
        read_sharegpt(FIXTURES / "empty.json")


def test_non_json_names_the_file_and_byte():
    with pytest.raises(DatasetError, match=r"not_json\.json: .*not JSON.*byte 0"):
        read_sharegpt(FIXTURES / "not_json.json")


def test_top_level_object_is_rejected():
    with pytest.raises(DatasetError, match=r"not_array\.json: expected a JSON array.*object"):
        read_sharegpt(FIXTURES / "not_array.json")


def test_record_without_conversations_names_index_and_id():
    with pytest.raises(DatasetError) as e:
        read_sharegpt(FIXTURES / "no_conversations.json")
    msg = str(e.value)
    assert "no_conversations.json: record 1 (id 'broken_7')" in msg
    assert "no 'conversations' key" in msg


def test_turn_without_value_names_record_and_turn():
    with pytest.raises(DatasetError) as e:
        read_sharegpt(FIXTURES / "bad_turn.json")
    msg = str(e.value)
    assert "bad_turn.json: record 2 (id 'badturn_3')" in msg and "turn 0" in msg
    assert "'from' and 'value'" in msg


@pytest.mark.parametrize(
    "records, match",
    [
        ([1, 2], r"record 0 at byte 1: expected an object, found int"),
        ([{"id": "x", "conversations": "hi"}], r"record 0 \(id 'x'\).*'conversations' list, found str"),
        (
            [{"id": "y", "conversations": [{"from": "human", "value": 3}, {"from": "gpt", "value": "a"}]}],
            r"record 0 \(id 'y'\).*turn 0",
        ),
        ([{"id": "z", "conversations": [{"from": "human", "value": "a"}, "text"]}], r"record 0 \(id 'z'\).*turn 1"),
    ],
)
def test_wrong_shapes(tmp_path, records, match):
    p = tmp_path / "shape.json"
    p.write_text(json.dumps(records))
    with pytest.raises(DatasetError, match=match):
        read_sharegpt(p)


def test_syntax_error_mid_file_is_an_error_not_a_truncation(tmp_path):
    good = json.loads((FIXTURES / "valid.json").read_text(encoding="utf-8"))
    text = json.dumps(good[:2])[:-1] + ', {"id": "bad" "conversations": []}, ' + json.dumps(good[2:])[1:]
    p = tmp_path / "syntax.json"
    p.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(
            DatasetError,
            match=r"invalid JSON: Expecting ':' delimiter"
            r"|invalid JSON: Expecting ',' delimiter",
        ) as e:
            read_sharegpt(p)
    assert "record 2" in str(e.value)


@pytest.mark.parametrize(
    "text, match",
    [
        ('[{"id": "a", "conversations": []}] extra', "extra data after the closing"),
        ('[{"id": "a", "conversations": []},]', "trailing comma"),
        ('[{"id": "a", "conversations": []} {"id": "b"}]', "expected ',' or ']'"),
    ],
)
def test_array_punctuation_errors(tmp_path, text, match):
    p = tmp_path / "punct.json"
    p.write_text(text)
    with pytest.raises(DatasetError, match=match):
        read_sharegpt(p)


@pytest.mark.parametrize("chunk", [1, 2, 1 << 20])
def test_invalid_utf8_names_the_byte(tmp_path, chunk):
    raw = (FIXTURES / "valid.json").read_bytes()
    at = raw.index("très".encode()) + 3  # the second byte of "è" becomes invalid
    p = tmp_path / "latin1.json"
    p.write_bytes(raw[:at] + b"\x41" + raw[at + 1 :])
    with pytest.raises(JSONArrayError, match=rf"not UTF-8 text.*byte {at - 1}"):
        list(JSONArrayStream(p, chunk_bytes=chunk))
    with pytest.raises(DatasetError, match=r"latin1\.json: not UTF-8 text"):
        read_sharegpt(p)


def test_stream_rejects_a_bad_chunk_size(tmp_path):
    with pytest.raises(ValueError, match="chunk_bytes"):
        JSONArrayStream(tmp_path / "x.json", chunk_bytes=0)


def test_json_array_error_says_where():
    e = JSONArrayError("broken", byte=12, index=3)
    assert str(e) == "broken (at record 3, byte 12)" and e.byte == 12 and e.index == 3
