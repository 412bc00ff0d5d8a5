"""A ``type: anthropic`` backend: the canonical (chat-shaped) request sent as an
Anthropic Messages request, and its answer and stream turned back into the canonical
ones (``dialects/anthropic/backend.py`` translates both ways).

The key goes in ``x-api-key``; ``anthropic-version`` is the client's when it sent one
(a Messages client), else the backend's; ``anthropic-beta`` is the union of the
client's and the backend's. A canonical request whose body came from a Messages client
carries its Anthropic-only parts (cache_control, thinking signatures) in ``x_anthropic``
extensions, which the translation restores: such a client passes through with only
what governance changed.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import orjson

from tokenplane.dialects.anthropic.backend import ChatChunks, to_chat_answer, to_messages_request
from tokenplane.dialects.sse import event_payload
from tokenplane.errors import envelope, invalid
from tokenplane.upstream.sse import DONE, frame
from tokenplane.upstream.types import Transport, UpstreamRequest, UpstreamResponse

MESSAGES_PATH = "/v1/messages"
COUNT_PATH = "/v1/messages/count_tokens"
CHAT_PATH = "/v1/chat/completions"
DEFAULT_VERSION = "2023-06-01"


class AnthropicTransport:
    """Speaks Messages to ``inner`` for chat requests; refuses the other kinds."""

    keeps_extensions = True  # the canonical body's x_anthropic parts are restored

    def __init__(self, inner: Transport, api_key_env: str | None = None,
                 version: str = DEFAULT_VERSION, betas: tuple[str, ...] = (),
                 default_max_tokens: int = 4096) -> None:
        self.inner = inner
        self.api_key_env = api_key_env
        self.version = version
        self.betas = betas
        self.default_max_tokens = default_max_tokens

    def headers(self, req: UpstreamRequest) -> dict[str, str]:
        client = req.client_headers
        out = {k: v for k, v in req.headers.items() if k != "authorization"}
        out["anthropic-version"] = (client.get("anthropic-version") if client else None) \
            or self.version
        betas = list(self.betas)
        asked = client.get("anthropic-beta") if client else None
        if asked:
            betas += [b.strip() for b in asked.split(",") if b.strip() and b.strip() not in betas]
        if betas:
            out["anthropic-beta"] = ",".join(betas)
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            out["x-api-key"] = key
        return out

    async def send(self, req: UpstreamRequest) -> UpstreamResponse:
        if req.path != CHAT_PATH:
            err = invalid(f"this model's backend speaks Anthropic's Messages API only; "
                          f"{req.path} cannot be served by it", code="unsupported_endpoint")
            return UpstreamResponse(400, {"content-type": "application/json"},
                                    body=orjson.dumps(envelope(err)))
        body = to_messages_request(orjson.loads(req.body),
                                   default_max_tokens=self.default_max_tokens)
        out = UpstreamRequest(MESSAGES_PATH, orjson.dumps(body), req.stream, req.timeouts,
                              self.headers(req))
        resp = await self.inner.send(out)
        if resp.status >= 400:
            return resp  # Anthropic's envelope: upstream_errors reads its "error" object
        if resp.events is None:
            answer = to_chat_answer(orjson.loads(resp.body or b"{}"))
            return UpstreamResponse(resp.status, resp.headers, body=orjson.dumps(answer))
        return UpstreamResponse(resp.status, {**resp.headers, "content-type": "text/event-stream"},
                                events=chat_events(resp.events), close=resp.close)

    async def count_tokens(self, body: dict[str, Any], req: UpstreamRequest) -> int | None:
        """The backend's own count of a Messages body's input tokens (None: it gave none)."""
        ask = UpstreamRequest(COUNT_PATH, orjson.dumps(body), False, req.timeouts,
                              self.headers(req))
        resp = await self.inner.send(ask)
        if resp.status >= 400 or resp.body is None:
            return None
        try:
            n = orjson.loads(resp.body).get("input_tokens")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return n if isinstance(n, int) and not isinstance(n, bool) else None

    async def close(self) -> None:
        await self.inner.close()


async def chat_events(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Anthropic's stream events as canonical ``data:`` chunks, ``[DONE]`` after
    ``message_stop``."""
    chunks = ChatChunks()
    try:
        async for item in events:
            out: list[bytes] = []
            for ev in item.split(b"\n\n"):
                data = event_payload(ev) if ev else None
                if data is None:
                    continue
                obj = orjson.loads(data)
                if not isinstance(obj, dict):
                    continue
                kind = obj.get("type")
                out.extend(frame(c) for c in chunks.feed(str(kind), obj))
                if kind == "message_stop":
                    out.append(DONE)
            if out:
                yield b"".join(out)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
