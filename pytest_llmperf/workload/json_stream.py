"""Stream the records of a top-level JSON array one at a time (ShareGPT's ~670 MB would
sit in memory twice under `json.load`), hashing the bytes in the same pass. A file cut
mid-record stops at the cut (`truncated`); any other defect raises JSONArrayError.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

CHUNK_BYTES = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_NEAR_END = 8  # a decode error this close to the buffer's end may be a record cut by the read


class JSONArrayError(ValueError):
    """The file is not a well-formed JSON array; says where."""

    def __init__(self, reason: str, *, byte: int | None = None, index: int | None = None):
        self.reason = reason
        self.byte = byte
        self.index = index
        where = []
        if index is not None:
            where.append(f"record {index}")
        if byte is not None:
            where.append(f"byte {byte}")
        super().__init__(f"{reason}" + (f" (at {', '.join(where)})" if where else ""))


class JSONArrayStream:
    """Iterate `(index, byte_offset, value)` over a file holding one JSON array; then
    `count`, `truncated`, `size_bytes` and `sha256` describe it."""

    def __init__(self, path: str | os.PathLike[str], *, chunk_bytes: int = CHUNK_BYTES):
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {chunk_bytes}")
        self.path = os.fspath(path)
        self.chunk_bytes = chunk_bytes
        self.count = 0
        self.truncated = False
        self.size_bytes = 0
        self.sha256 = ""

    def __iter__(self) -> Iterator[tuple[int, int, Any]]:
        with open(self.path, "rb") as f:
            yield from _Reader(self, f).records()


class _Reader:
    """The parse state for one pass: a sliding text window over the file."""

    def __init__(self, owner: JSONArrayStream, f: BinaryIO) -> None:
        self.owner = owner
        self.f = f
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.hasher = hashlib.sha256()
        self.json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0  # read position in buf
        # Byte offset of buf[mark_char], advanced as records are met (each text encoded once).
        self.mark_char = 0
        self.mark_byte = 0
        self.read_bytes = 0
        self.eof = False
        self.cut_in_char = False

    # -- the window ---------------------------------------------------------------

    def fill(self) -> None:
        """Drop consumed text, append the next chunk (or mark EOF)."""
        raw = self.f.read(self.owner.chunk_bytes)
        self.hasher.update(raw)
        pending = len(self.decoder.getstate()[0])  # bytes of a character split by the last read
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as e:
            if not raw:  # the file ends inside a character: a cut, judged by the parser
                text, self.cut_in_char = "", True
            else:
                raise JSONArrayError(f"not UTF-8 text ({e.reason})", byte=self.read_bytes - pending + e.start) from None
        self.read_bytes += len(raw)
        if not raw:
            self.eof = True
            self.owner.size_bytes = self.read_bytes
            self.owner.sha256 = self.hasher.hexdigest()
        base = self.byte_at(self.pos)
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        self.mark_char, self.mark_byte = 0, base

    def byte_at(self, i: int) -> int:
        """Byte offset in the file of buf[i] (moves the mark forward, never back)."""
        if i < self.mark_char:  # only on error paths; recount from the mark backwards
            return self.mark_byte - len(self.buf[i : self.mark_char].encode("utf-8"))
        b = self.mark_byte + len(self.buf[self.mark_char : i].encode("utf-8"))
        self.mark_char, self.mark_byte = i, b
        return b

    def peek(self) -> str:
        """Next non-whitespace character ('' at EOF), leaving pos on it."""
        while True:
            ws = _WS.match(self.buf, self.pos)
            assert ws is not None  # the pattern matches the empty string
            self.pos = ws.end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self.fill()

    def drain(self) -> None:
        """Read to EOF so size and hash describe the whole file."""
        while not self.eof:
            self.pos = len(self.buf)
            self.fill()

    # -- the grammar -------------------------------------------------------------

    def records(self) -> Iterator[tuple[int, int, Any]]:
        first = self.peek()
        if first == "\ufeff":  # a UTF-8 byte-order mark: harmless, skip it
            self.pos += 1
            first = self.peek()
        if first == "":
            self.drain()
            raise JSONArrayError("file is empty")
        if first != "[":
            # '{' first is usually JSON Lines, a common ShareGPT variant: say so.
            kind = "a JSON object (JSON Lines? ShareGPT V3 is one array)" if first == "{" else f"{first!r}"
            hint = "" if first in '{"-0123456789tfn' else " (not JSON)"
            raise JSONArrayError(
                f"expected a JSON array '[' at the top level, found {kind}{hint}",
                byte=self.byte_at(self.pos),
            )
        self.pos += 1
        if self.peek() == "]":
            self.pos += 1
            self.finish()
            return
        while True:
            if self.peek() == "":
                self.truncate()
                return
            start_byte = self.byte_at(self.pos)
            value = self.decode_value()
            if value is _INCOMPLETE:
                self.truncate()
                return
            index = self.owner.count
            self.owner.count += 1
            yield index, start_byte, value
            sep = self.peek()
            if sep == ",":
                self.pos += 1
                if self.peek() == "]":
                    raise JSONArrayError(
                        "trailing comma before ']'",
                        byte=self.byte_at(self.pos),
                        index=index + 1,
                    )
                continue
            if sep == "]":
                self.pos += 1
                self.finish()
                return
            if sep == "":
                self.truncate()
                return
            raise JSONArrayError(
                f"expected ',' or ']' after a record, found {sep!r}",
                byte=self.byte_at(self.pos),
                index=index + 1,
            )

    def decode_value(self) -> Any:
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                maybe_cut = e.msg.startswith("Unterminated string") or (e.pos >= len(self.buf) - _NEAR_END)
                if maybe_cut and not self.eof:
                    self.fill()
                    continue
                if maybe_cut:
                    return _INCOMPLETE
                raise JSONArrayError(
                    f"invalid JSON: {e.msg}",
                    byte=self.byte_at(e.pos),
                    index=self.owner.count,
                ) from None
            # A number near the window's edge may continue in the next chunk.
            if end > len(self.buf) - _NEAR_END and not self.eof:
                self.fill()
                continue
            self.pos = end
            return value

    def finish(self) -> None:
        extra = self.peek()
        if extra:
            raise JSONArrayError(f"extra data after the closing ']': {extra!r}", byte=self.byte_at(self.pos))
        self.drain()
        if self.cut_in_char:
            raise JSONArrayError("file ends inside a UTF-8 character after the closing ']'")

    def truncate(self) -> None:
        self.drain()
        self.owner.truncated = True


_INCOMPLETE = object()
