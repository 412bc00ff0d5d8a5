"""The upstream interface: one request out, a body or a stream of SSE events back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tokenplane.config.schema import TimeoutConfig


@dataclass(slots=True)
class UpstreamRequest:
    path: str
    body: bytes
    stream: bool
    timeouts: TimeoutConfig
    headers: dict[str, str] = field(default_factory=dict)
    # the client's request headers (lower-case names): a backend type forwards those its
    # API defines (an Anthropic backend: anthropic-version, anthropic-beta)
    client_headers: Mapping[str, str] | None = None


@dataclass(slots=True)
class UpstreamResponse:
    """``events`` yields, for a stream, items of one or more complete SSE events
    (``b"data: ...\\n\\n"``), as they arrived.

    ``close`` cancels the upstream request (the engine stops generating); it is safe
    to call more than once.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes | None = None
    events: AsyncIterator[bytes] | None = None
    close: Callable[[], Awaitable[None]] | None = None

    async def aclose(self) -> None:
        if self.close is not None:
            await self.close()


class UpstreamError(Exception):
    """A fault of the upstream (not the client): mapped to 502, 503 or 504."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class Transport(Protocol):
    async def send(self, req: UpstreamRequest) -> UpstreamResponse: ...

    async def close(self) -> None: ...
