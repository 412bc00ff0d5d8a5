"""A canonical answer's stream (``chat.completion.chunk`` objects) as Anthropic
Messages stream events.

Blocks open and close as the chunks' deltas change kind: ``reasoning_content`` is a
thinking block, ``content`` a text block, each tool call index a tool_use block whose
arguments fragments are ``input_json_delta`` events. A delta's ``x_anthropic`` may
carry what only an Anthropic backend gives (``backend.ChatChunks`` puts it there): a
thinking block's ``signature``, a ``redacted_thinking`` block's data, the matched
``stop_sequence``. A tool call fragment for an index whose block is already closed
(backends interleaving parallel calls) cannot be told in Anthropic's sequential
blocks, and is dropped.
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.dialects.anthropic.answer import matched_stop, stop_reason, tool_use_id
from tokenplane.dialects.anthropic.errors import error_event
from tokenplane.dialects.anthropic.extension import EXT, ext
from tokenplane.dialects.anthropic.sse import frame
from tokenplane.dialects.usage import Usage
from tokenplane.errors import GatewayError

PING = frame("ping", {"type": "ping"})
# A text delta's frame around its index and its JSON-encoded text: the same bytes as
# ``frame("content_block_delta", {...})`` without building and encoding the dicts
# (one per token of every streamed answer).
_TEXT_DELTA_HEAD = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_TEXT_DELTA_MID = b',"delta":{"type":"text_delta","text":'
_TEXT_DELTA_TAIL = b"}}\n\n"


class MessagesStream:
    """The Messages events of one answer's stream: :meth:`start`, :meth:`feed` per
    chunk, :meth:`finish` once (each returns the bytes to send)."""

    def __init__(self, *, model: str, message_id: str, input_usage: Usage | None) -> None:
        self.model = model
        self.message_id = message_id
        self.input_usage = input_usage
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None
        self._started = False
        self._finished = False
        self._index = -1  # the open block's index, -1 when none is open
        self._next = 0  # the next block's index
        self._kind = ""  # "text", "thinking" or "tool_use" while a block is open
        self._tool = -1  # the chat tool-call index of the open tool_use block
        self._tools_seen: set[int] = set()

    def start(self) -> bytes:
        """``message_start``: the message with no content yet, the input usage."""
        if self._started:
            return b""
        self._started = True
        usage = (self.input_usage or Usage()).to_anthropic()
        usage["output_tokens"] = 1
        return frame("message_start", {"type": "message_start", "message": {
            "id": self.message_id, "type": "message", "role": "assistant",
            "model": self.model, "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": usage}})

    def _close(self) -> bytes:
        if self._index < 0:
            return b""
        out = frame("content_block_stop", {"type": "content_block_stop", "index": self._index})
        self._index, self._kind, self._tool = -1, "", -1
        return out

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._index, self._kind = self._next, kind
        self._next += 1
        return out + frame("content_block_start", {"type": "content_block_start",
                                                   "index": self._index,
                                                   "content_block": block})

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return frame("content_block_delta", {"type": "content_block_delta",
                                             "index": self._index, "delta": delta})

    def _thinking(self, text: str) -> bytes:
        out = b""
        if self._kind != "thinking":
            out = self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
        return out + self._delta({"type": "thinking_delta", "thinking": text})

    def _text(self, text: str) -> bytes:
        out = b""
        if self._kind != "text":
            out = self._open("text", {"type": "text", "text": ""})
        return (out + _TEXT_DELTA_HEAD + str(self._index).encode() + _TEXT_DELTA_MID
                + orjson.dumps(text) + _TEXT_DELTA_TAIL)

    def _tool_call(self, position: int, call: dict[str, Any]) -> bytes:
        idx = call.get("index")
        idx = idx if isinstance(idx, int) else position
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        out = b""
        if not (self._kind == "tool_use" and self._tool == idx):
            if idx in self._tools_seen:
                return b""  # its block is closed already
            self._tools_seen.add(idx)
            name = fn.get("name")
            out = self._open("tool_use", {
                "type": "tool_use", "id": tool_use_id(call.get("id"), self.message_id, idx),
                "name": name if isinstance(name, str) else "", "input": {}})
            self._tool = idx
        args = fn.get("arguments")
        if isinstance(args, str) and args:
            out += self._delta({"type": "input_json_delta", "partial_json": args})
        return out

    def _extension(self, x: dict[str, Any]) -> bytes:
        out = b""
        sig = x.get("signature")
        if isinstance(sig, str) and sig:
            if self._kind != "thinking":
                out += self._open("thinking",
                                  {"type": "thinking", "thinking": "", "signature": ""})
            out += self._delta({"type": "signature_delta", "signature": sig})
        data = x.get("redacted_thinking")
        if isinstance(data, str):
            out += self._open("redacted_thinking", {"type": "redacted_thinking", "data": data})
            out += self._close()
        return out

    def feed(self, chunk: dict[str, Any]) -> bytes:
        """The events of one ``chat.completion.chunk`` (often none)."""
        if self._kind == "text" and not self._finished:
            text = self._more_text(chunk)
            if text is not None:
                return text
        if self._finished:
            return b""
        out = b"" if self._started else self.start()
        usage = chunk.get("usage")
        if usage is not None:
            u = Usage.read(usage, partial=True)
            if u is not None:
                self.usage = u
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            for key in ("reasoning_content", "reasoning"):
                v = delta.get(key)
                if isinstance(v, str) and v:
                    out += self._thinking(v)
                    break
            if EXT in delta:
                x = ext(delta)
                if x:
                    out += self._extension(x)
            content = delta.get("content")
            if isinstance(content, str) and content:
                out += self._text(content)
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for i, call in enumerate(calls):
                    if isinstance(call, dict):
                        out += self._tool_call(i, call)
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finish_reason = finish
            if (EXT in delta or EXT in choice or "stop_reason" in choice
                    or "message" in choice):  # else no stop sequence to read
                seq = matched_stop(choice)
                if seq is not None:
                    self.stop_sequence = seq
        return out

    def _more_text(self, chunk: dict[str, Any]) -> bytes | None:
        """The common chunk while a text block is open, one choice's delta of more text
        and nothing else, rendered as :meth:`feed` would; None for any other chunk."""
        choices = chunk.get("choices")
        if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
            return None
        choice = choices[0]
        if (type(choice) is not dict or choice.get("finish_reason") is not None
                or choice.get("index", 0) != 0 or EXT in choice or "stop_reason" in choice
                or "message" in choice):
            return None
        delta = choice.get("delta")
        # the delta holds the content, and maybe the role, only
        if type(delta) is not dict or "content" not in delta or not (
                len(delta) == 1 or (len(delta) == 2 and "role" in delta)):
            return None
        content = delta["content"]
        if type(content) is not str:
            return None
        if not content:
            return b""
        return (_TEXT_DELTA_HEAD + str(self._index).encode() + _TEXT_DELTA_MID
                + orjson.dumps(content) + _TEXT_DELTA_TAIL)

    def finish(self, usage: Usage | None = None) -> bytes:
        """Closes the open block; ``message_delta`` (stop reason, cumulative usage) and
        ``message_stop``. Once: later calls return nothing."""
        if self._finished:
            return b""
        out = self.start()
        self._finished = True
        if usage is not None:
            self.usage = usage
        out += self._close()
        reason = stop_reason(self.finish_reason, bool(self._tools_seen))
        seq = self.stop_sequence if reason == "end_turn" else None
        if seq is not None:
            reason = "stop_sequence"
        u = self.usage or Usage()
        i = self.input_usage
        if i is not None and not u.input:  # no input counted upstream: the gateway's count
            u = Usage(input=i.input, output=u.output, cached=i.cached,
                      cache_write_5m=i.cache_write_5m, cache_write_1h=i.cache_write_1h,
                      reasoning=u.reasoning)
        return out + frame("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": seq},
            "usage": {"input_tokens": u.uncached_input,
                      "cache_creation_input_tokens": u.cache_write,
                      "cache_read_input_tokens": u.cached,
                      "output_tokens": u.output},
        }) + frame("message_stop", {"type": "message_stop"})

    def ping(self) -> bytes:
        return PING

    def error(self, err: GatewayError, request_id: str) -> bytes:
        """The ``error`` event (no block is closed: the stream ends there)."""
        return error_event(err, request_id)
