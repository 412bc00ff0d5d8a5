"""The Anthropic Messages dialect at the gateway's edge: ``x-api-key``, Anthropic's
error envelope and statuses (529 for overloaded), and the canonical answer and stream
rendered as a Messages answer and Messages events (``answer.py``, ``stream.py``)."""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.dialects.anthropic import answer, errors
from tokenplane.dialects.anthropic.stream import MessagesStream
from tokenplane.dialects.base import AnswerInfo, Dialect
from tokenplane.dialects.sse import event_payload
from tokenplane.dialects.usage import Usage
from tokenplane.errors import GatewayError


def message_id(request_id: str) -> str:
    """A Messages id (``msg_...``) from the gateway's request id."""
    return "msg_" + request_id.removeprefix("req_")


def upstream_error(obj: dict[str, Any]) -> GatewayError:
    """The canonical stream's error event (OpenAI's envelope) as an error."""
    e = obj.get("error")
    e = e if isinstance(e, dict) else {}
    code = e.get("code")
    status = 502 if e.get("type") == "upstream_error" else 500
    return GatewayError(status, str(e.get("message") or "the upstream failed"),
                        code=code if isinstance(code, str) else None)


class AnthropicDialect(Dialect):
    __slots__ = ()

    name = "anthropic"
    title = "Anthropic Messages"
    auth_headers = ("x-api-key", "authorization")
    auth_hint = "'x-api-key: <key>' (or 'Authorization: Bearer <key>')"
    renders = True

    def error_status(self, status: int) -> int:
        return errors.wire_status(status)

    def error_body(self, err: GatewayError, request_id: str) -> bytes:
        return errors.error_body(err, request_id)

    def error_headers(self, request_id: str) -> dict[str, str]:
        return {"x-request-id": request_id, "request-id": request_id}

    def answer(self, body: bytes, info: AnswerInfo) -> bytes:
        obj = orjson.loads(body)
        msg = answer.to_messages(obj, model=info.model, message_id=message_id(info.request_id),
                                 usage=None)
        extra = obj.get("tokenplane")
        if extra is not None:
            msg["tokenplane"] = extra
        return orjson.dumps(msg)

    def usage(self, usage: Usage) -> dict[str, Any]:
        return usage.to_anthropic()

    def renderer(self, info: AnswerInfo) -> MessagesRenderer:
        return MessagesRenderer(info)


class MessagesRenderer:
    """One stream's canonical events rendered as Messages events (``stream.py``)."""

    __slots__ = ("ended", "out", "request_id")

    def __init__(self, info: AnswerInfo) -> None:
        self.out = MessagesStream(model=info.model, message_id=message_id(info.request_id),
                                  input_usage=Usage(input=info.input_tokens))
        self.request_id = info.request_id
        self.ended = False

    def start(self) -> bytes:
        return self.out.start()

    def feed(self, item: bytes) -> bytes:
        out = self.out
        frames: list[bytes] = []
        for ev in item.split(b"\n\n"):
            if not ev or self.ended:
                continue
            # the common event, one data line of a JSON object, read in place
            data = ev[6:] if ev.startswith(b"data: {") and b"\n" not in ev \
                else event_payload(ev)
            if data is None:
                if ev.startswith(b"data: [DONE]"):
                    frames.append(out.finish())
                    self.ended = True
                continue  # SSE comments (a budget's note) have no Messages form
            obj = orjson.loads(data)
            if not isinstance(obj, dict):
                continue
            if "error" in obj:
                frames.append(out.error(upstream_error(obj), self.request_id))
                self.ended = True  # an error event ends a Messages stream
            else:
                frames.append(out.feed(obj))
        return frames[0] if len(frames) == 1 else b"".join(frames)


ANTHROPIC = AnthropicDialect()
