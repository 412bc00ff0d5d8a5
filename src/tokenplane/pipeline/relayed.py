"""What a stream relayed, kept as the text needed to count it.

The meter counts a stream's output itself when the upstream reported no usage (a
client that left, a stream ended by a stall or a budget, a server that reports
none), and the audit log may record it; both need the relayed text, not the events.
Holding every relayed event costs about 300 bytes per token (0.9 MB for a 3,000-token
stream), so content events are held raw only until they add up to ``FOLD_BYTES``,
then parsed once and folded into the visible and reasoning text: a stream keeps
O(its text), and a short stream that ends with usage (the common case) parses
nothing. The price: a long stream's events are all parsed once (about 1-2 us each),
which the audit log (on by default, recording redacted responses) did anyway.
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.operations.base import Operation
from tokenplane.upstream.sse import payload

FOLD_BYTES = 1 << 14  # raw events held before they are folded into text


def parse_event(ev: bytes) -> dict[str, Any] | None:
    """The JSON object of one ``data:`` event, or None."""
    data = payload(ev + b"\n")
    if data is None:
        return None
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _parse_all(events: list[bytes]) -> list[dict[str, Any]]:
    """The JSON objects of ``data:`` events, parsed as one array (a fifth cheaper than
    one by one); one by one if any is not JSON."""
    datas = []
    for ev in events:
        data = ev[5:] if b"\n" not in ev else payload(ev + b"\n")  # one line: "data:..."
        if data:
            datas.append(data)
    try:
        objs = orjson.loads(b"[" + b",".join(datas) + b"]")
    except orjson.JSONDecodeError:
        return [obj for ev in events if (obj := parse_event(ev)) is not None]
    return [obj for obj in objs if isinstance(obj, dict)]


class RelayedText:
    """The content events a stream relayed: the newest raw (``pending``), the rest as
    text. Events are folded only between upstream reads (:meth:`settle`), so the
    events of the read being relayed are always in ``pending``."""

    __slots__ = ("_last", "_reasoning", "_size", "_text", "operation", "pending")

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.pending: list[bytes] = []
        self._size = 0
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._last: bytes | None = None

    def add(self, ev: bytes) -> None:
        self.pending.append(ev)
        self._size += len(ev)

    def settle(self) -> None:
        """Folds the pending events into text once they are many."""
        if self._size >= FOLD_BYTES:
            self._fold()

    def _fold(self) -> None:
        pending = self.pending
        if not pending:
            return
        text, reasoning = self.operation.stream_text(_parse_all(pending))
        if text:
            self._text.append(text)
        if reasoning:
            self._reasoning.append(reasoning)
        self._last = pending[-1]
        self.pending = []
        self._size = 0

    @property
    def last(self) -> bytes | None:
        """The newest content event relayed."""
        return self.pending[-1] if self.pending else self._last

    def text(self) -> tuple[str, str]:
        """The visible and reasoning text relayed so far."""
        self._fold()
        text = self._text
        if len(text) > 1:
            self._text = text = ["".join(text)]
        reasoning = self._reasoning
        if len(reasoning) > 1:
            self._reasoning = reasoning = ["".join(reasoning)]
        return (text[0] if text else ""), (reasoning[0] if reasoning else "")

    def retained_bytes(self) -> int:
        """What it holds: raw events and text (bytes, characters)."""
        return (self._size + sum(len(t) for t in self._text)
                + sum(len(r) for r in self._reasoning) + len(self._last or b""))
