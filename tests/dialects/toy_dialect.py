"""A toy wire dialect, "Shout": ``{"model", "say", "limit"?, "stream"?}`` in, the answer
shouted back as ``{"shout": ..., "used": {"in", "out"}}`` (or a stream of ``{"piece"}``
events and a closing ``{"end": true, "used"}``), errors as ``{"oops": ...}``, the key in
``x-shout-key``. One module for the dialect (its rendering) and one operation (its
request): nothing else in the gateway changes (docs/EXTENDING.md, "A wire dialect")."""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.dialects.base import AnswerInfo, Dialect
from tokenplane.dialects.sse import event_payload
from tokenplane.dialects.usage import Usage
from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.chat import ChatCompletions


class Shout(Dialect):
    __slots__ = ()

    name = "shout"
    title = "Shout"
    auth_headers = ("x-shout-key",)
    auth_hint = "'x-shout-key: <key>'"
    renders = True

    def error_body(self, err: GatewayError, request_id: str) -> bytes:
        return orjson.dumps({"oops": err.message, "field": err.param})

    def answer(self, body: bytes, info: AnswerInfo) -> bytes:
        obj = orjson.loads(body)
        text = obj["choices"][0]["message"]["content"] or ""
        u = Usage.read(obj.get("usage")) or Usage()
        return orjson.dumps({"shout": text.upper(), "used": {"in": u.input, "out": u.output}})

    def renderer(self, info: AnswerInfo) -> ShoutRenderer:
        return ShoutRenderer()


class ShoutRenderer:
    """One stream: each piece of text shouted, then the tokens used."""

    def __init__(self) -> None:
        self.used = Usage()

    def start(self) -> bytes:
        return b""

    def feed(self, item: bytes) -> bytes:
        out = []
        for ev in item.split(b"\n\n"):
            data = event_payload(ev) if ev else None
            if data is None:
                if ev.startswith(b"data: [DONE]"):
                    used = {"in": self.used.input, "out": self.used.output}
                    out.append(b"data: " + orjson.dumps({"end": True, "used": used}) + b"\n\n")
                continue
            obj = orjson.loads(data)
            self.used = Usage.read(obj.get("usage")) or self.used
            for ch in obj.get("choices") or ():
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    out.append(b"data: " + orjson.dumps({"piece": piece.upper()}) + b"\n\n")
        return b"".join(out)


SHOUT = Shout()


class ShoutOperation(ChatCompletions):
    __slots__ = ()

    path = "/v1/shout"
    name = "shout"
    upstream_path = "/v1/chat/completions"  # its canonical request is a chat one
    dialect = SHOUT

    def canonical(self, body: dict[str, Any]) -> dict[str, Any]:
        say, limit = body.get("say"), body.get("limit", 16)
        if not isinstance(body.get("model"), str):
            raise invalid("say which model", param="model")
        if not isinstance(say, str) or not say:
            raise invalid("say something", param="say")
        if not isinstance(limit, int) or not 1 <= limit <= 4096:
            raise invalid("limit is a number of tokens from 1 to 4096", param="limit")
        out: dict[str, Any] = {"model": body["model"], "max_tokens": limit,
                               "messages": [{"role": "user", "content": say}]}
        if body.get("stream") is True:
            out |= {"stream": True, "stream_options": {"include_usage": True}}
        return out


SHOUT_OPERATION = ShoutOperation()
