"""Prompt counts of whole chat requests seen before, keyed by their exact content.

Retries, evaluation runs, canned prompts and load tests send the same messages again
and again. Counting a chat request walks its messages, the chat template's pieces and
one segment-cache lookup per text run (tens of us even when every segment is cached);
a repeated request costs one ``orjson.dumps`` of its messages and one dict lookup here.
The key is the exact serialised content (messages and tools) and the alias, so a hit
returns what counting would: counting is a pure function of those. Bounded by entries
and by the bytes of the keys held (least recently used out first).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from tokenplane.tokens.counter import CountResult

MemoKey = tuple[str, bytes, bytes]


def _copy(result: CountResult) -> CountResult:
    """A result the caller may change without touching the memo's."""
    c = result.counts
    return CountResult(c.copy(), list(result.segments), result.system_fingerprint,
                       result.exact, result.flags)


class ChatCountMemo:
    def __init__(self, max_entries: int = 4096, max_bytes: int = 8_000_000) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("count memo bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[MemoKey, CountResult] = OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def key(alias: str, messages: Any, tools: Any) -> MemoKey | None:
        """The memo key of a request, or None when its content does not serialise."""
        try:
            return (alias, orjson.dumps(messages), orjson.dumps(tools) if tools else b"")
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return None

    def get(self, key: MemoKey) -> CountResult | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return _copy(found)

    def put(self, key: MemoKey, result: CountResult) -> None:
        size = len(key[1]) + len(key[2])
        if size > self.max_bytes or key in self._entries:
            return
        self._entries[key] = _copy(result)
        self.bytes += size
        entries = self._entries
        while len(entries) > self.max_entries or self.bytes > self.max_bytes:
            (_, old_messages, old_tools), _ = entries.popitem(last=False)
            self.bytes -= len(old_messages) + len(old_tools)
