"""Transport to a simulated engine replica that lives in the gateway's own process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from tokenplane.upstream.types import UpstreamRequest, UpstreamResponse

if TYPE_CHECKING:
    from tokenplane.engine.serving.service import EngineService


class InProcessTransport:
    """Calls an :class:`EngineService` directly: same bytes as over HTTP, no socket."""

    def __init__(self, service: EngineService) -> None:
        self.service = service

    async def send(self, req: UpstreamRequest) -> UpstreamResponse:
        resp = await self.service.handle("POST", req.path, req.body, req.headers)
        stream = resp.stream
        if stream is None:
            return UpstreamResponse(resp.status, resp.headers, body=resp.body or b"")

        async def close() -> None:
            await _aclose(stream)

        return UpstreamResponse(resp.status, resp.headers, events=stream, close=close)

    async def close(self) -> None:
        return None


async def _aclose(stream: AsyncIterator[bytes]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
