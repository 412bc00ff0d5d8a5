"""A wire dialect: how one client API is spoken at the gateway's edge.

The stages of the token path work on the canonical request (a chat-shaped body: its
``messages``, ``tools``, caps, ``stop``, stream options) and produce the canonical
answer (a ``chat.completion`` object, or ``chat.completion.chunk`` events ending in
``[DONE]``). A :class:`Dialect` owns everything between that and the client's wire:
the auth headers it accepts, its error envelope and status codes, and the rendering
of the canonical answer and stream in its format. The request side (parsing the
client's body into the canonical one) is the operation's (``operations/``), which
names its dialect. The OpenAI dialect is the identity: its canonical form *is* its
wire form, so the chat path pays nothing for the edge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from tokenplane.dialects.usage import Usage
from tokenplane.errors import GatewayError, error_body


@dataclass(frozen=True, slots=True)
class AnswerInfo:
    """What a dialect needs of the request to render its answer: the model name the
    client sent, the request id, and the prompt's tokens as the gateway counted them
    (the opening event of a stream reports them before the upstream does)."""

    model: str
    request_id: str
    input_tokens: int = 0


class StreamRenderer(Protocol):
    """A stream's rendering in a dialect, one per stream: ``start`` the events before
    any upstream one, ``feed`` each item of canonical SSE bytes (one or more whole
    events; ``[DONE]`` among them ends the rendering) as the dialect's bytes. Plain
    calls, no generator of its own: the writer applies it to what it writes."""

    def start(self) -> bytes: ...

    def feed(self, item: bytes) -> bytes: ...


class Dialect:
    """The OpenAI dialect (the identity); other dialects override what differs."""

    __slots__ = ()

    name = "openai"
    title = "OpenAI-compatible"  # how documents (the OpenAPI one) name the API
    # the headers that may carry the API key, in the order they are read; a header
    # named "authorization" carries "Bearer <key>"
    auth_headers: tuple[str, ...] = ("authorization", "api-key")
    auth_hint = "'Authorization: Bearer <key>'"  # how to send the key, for the 401
    renders: bool = False  # False: the canonical answer is sent as it is

    def error_status(self, status: int) -> int:
        """The HTTP status this dialect answers for the gateway's ``status``."""
        return status

    def error_body(self, err: GatewayError, request_id: str) -> bytes:
        return error_body(err)

    def error_headers(self, request_id: str) -> dict[str, str]:
        """Headers every answer of this dialect carries besides the error's own."""
        return {"x-request-id": request_id}

    def answer(self, body: bytes, info: AnswerInfo) -> bytes:
        """A whole canonical answer (a ``chat.completion`` JSON) in this dialect."""
        return body

    def renderer(self, info: AnswerInfo) -> StreamRenderer | None:
        """What renders one stream in this dialect (None: the canonical bytes as they are)."""
        return None

    def stream(self, events: AsyncIterator[bytes], info: AnswerInfo) -> AsyncIterator[bytes]:
        """The canonical stream's SSE bytes (``data:`` chunks, ``[DONE]``) in this dialect,
        as an iterator (for a writer that does not apply :meth:`renderer` itself)."""
        render = self.renderer(info)
        return events if render is None else rendered_stream(events, render)

    def usage(self, usage: Usage) -> Mapping[str, object]:
        """A usage value in this dialect's fields."""
        return usage.to_openai()


OPENAI = Dialect()


async def rendered_stream(events: AsyncIterator[bytes], render: StreamRenderer
                          ) -> AsyncIterator[bytes]:
    """``events`` rendered by ``render``; closing it closes ``events``."""
    try:
        yield render.start()
        async for item in events:
            out = render.feed(item)
            if out:
                yield out
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


def api_key(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The API key sent in the first of ``names`` present (``authorization`` as
    ``Bearer <key>``), or None."""
    for name in names:
        value = headers.get(name)
        if not value:
            continue
        if name == "authorization":
            scheme, _, key = value.partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return key.strip()
            continue
        return value.strip() or None
    return None
