"""
A bounded Server-Sent Events parser (the WHATWG event-stream rules) for the API's streaming routes.

The server is trusted less than a library usually trusts it: a line or an event over its cap raises
SmolProtocolError instead of growing memory, so an endless line or a runaway event costs at most the cap.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional

from .errors import SmolProtocolError

# exec/stream chunks are 64 KiB of base64 in JSON; 8 MiB leaves room without letting a server grow us unbounded
DEFAULT_MAX_LINE = 8 * 1024 * 1024
DEFAULT_MAX_EVENT = 8 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: Optional[str] = None


class SseParser:
    """Feed bytes in any split; take complete events out. Comments (`: ping`) and `retry:` are skipped."""

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, max_event: int = DEFAULT_MAX_EVENT) -> None:
        self._max_line = max_line
        self._max_event = max_event
        self._buf = bytearray()
        self._skip_lf = False  # a chunk ended in CR: a LF opening the next one belongs to it
        self._first = True
        self._event = ""
        self._data: List[str] = []
        self._data_size = 0
        self._id: Optional[str] = None
        self._last_id: Optional[str] = None

    def feed(self, chunk: bytes) -> List[SseEvent]:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        if not chunk:
            return []
        scanned = len(self._buf)  # what is kept from the last feed holds no line end: scan only the new bytes
        self._buf += chunk
        if self._first:
            if self._buf.startswith(_BOM):
                del self._buf[:3]
            elif _BOM.startswith(bytes(self._buf)):
                return []  # one or two bytes of what may be a BOM: wait for the rest
            self._first = False
            scanned = 0  # the BOM's bytes shifted what was kept
        out: List[SseEvent] = []
        start = 0
        while True:
            m = _EOL.search(self._buf, max(start, scanned))
            if m is None:
                break
            # a CR as the very last byte may be the first half of CRLF split across chunks
            if m.group() == b"\r" and m.end() == len(self._buf):
                self._skip_lf = True
            if m.start() - start > self._max_line:
                self._overflow("line", m.start() - start)
            ev = self._line(bytes(self._buf[start:m.start()]))
            if ev is not None:
                out.append(ev)
            start = m.end()
        del self._buf[:start]
        if len(self._buf) > self._max_line:
            self._overflow("line", len(self._buf))
        return out

    def _overflow(self, what: str, size: int) -> None:
        cap = self._max_line if what == "line" else self._max_event
        self._buf = bytearray()
        raise SmolProtocolError(
            f"event stream {what} of {size} bytes is over the {cap}-byte cap: the server sent a malformed stream"
        )

    def _line(self, raw: bytes) -> Optional[SseEvent]:
        if not raw:
            return self._dispatch()
        if raw[:1] == b":":
            return None
        line = raw.decode("utf-8", errors="replace")
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                size = self._data_size
                self._reset()
                self._overflow("event", size)
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Optional[SseEvent]:
        if self._id is not None:
            self._last_id = self._id
        if not self._data:
            self._reset()
            return None
        ev = SseEvent(self._event or "message", "\n".join(self._data), self._last_id)
        self._reset()
        return ev

    def _reset(self) -> None:
        self._event = ""
        self._data = []
        self._data_size = 0
        self._id = None


def iter_events(chunks: Iterable[bytes], parser: Optional[SseParser] = None) -> Iterator[SseEvent]:
    """Events from a byte stream; an event cut off by the end of the stream is dropped, as the spec says."""
    p = parser or SseParser()
    for chunk in chunks:
        yield from p.feed(chunk)
