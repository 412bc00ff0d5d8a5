"""Transport to an OpenAI-compatible server over HTTP (vLLM, SGLang, OpenAI, ...).

One pooled aiohttp session per upstream. Timeouts: connect, first token (time to
response headers and first event), between tokens, and total. SSE events are split
on blank lines and handed on as bytes, never re-encoded.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import aiohttp

from tokenplane.upstream.types import UpstreamError, UpstreamRequest, UpstreamResponse

_HOP_HEADERS = ("content-type", "x-request-id", "openai-processing-ms")


class HttpTransport:
    def __init__(self, base_url: str, api_key_env: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key_env = api_key_env
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=True,
            )
        return self._session

    def _headers(self, req: UpstreamRequest) -> dict[str, str]:
        headers = {"content-type": "application/json", **req.headers}
        if self._api_key_env:
            key = os.environ.get(self._api_key_env)
            if key:
                headers["authorization"] = f"Bearer {key}"
        return headers

    async def send(self, req: UpstreamRequest) -> UpstreamResponse:
        t = req.timeouts
        loop = asyncio.get_running_loop()
        deadline = loop.time() + t.total if t.total else None
        # a stream must start within first_token; a non-stream answer comes whole, so
        # only the total timeout bounds it
        first = (t.first_token or None) if req.stream else None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=t.connect or None)
        try:
            async with asyncio.timeout_at(_sooner(loop.time(), first, deadline)):
                resp = await self._client().post(
                    self.base_url + req.path, data=req.body, headers=self._headers(req),
                    timeout=timeout,
                )
                if not req.stream or resp.status >= 400:
                    body = await resp.read()  # still under the timeout above
                    resp.release()
                    return UpstreamResponse(resp.status, _pick(resp), body=body)
        except TimeoutError:
            raise UpstreamError(
                504, "upstream timed out before responding", "upstream_timeout"
            ) from None
        except aiohttp.ClientConnectorError as exc:
            raise UpstreamError(
                503, f"upstream unreachable: {exc.os_error}", "upstream_unavailable"
            ) from None
        except aiohttp.ClientError as exc:
            raise UpstreamError(
                502, f"upstream failed: {type(exc).__name__}", "upstream_error"
            ) from None

        async def close() -> None:
            resp.close()

        return UpstreamResponse(
            resp.status, _pick(resp), events=_events(resp, t.first_token, t.between_tokens,
                                                    deadline), close=close,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _sooner(now: float, delay: float | None, deadline: float | None) -> float | None:
    cands = [d for d in (now + delay if delay else None, deadline) if d is not None]
    return min(cands) if cands else None


def _pick(resp: aiohttp.ClientResponse) -> dict[str, str]:
    return {h: resp.headers[h] for h in _HOP_HEADERS if h in resp.headers}


async def _events(
    resp: aiohttp.ClientResponse, first: float, between: float, deadline: float | None
) -> AsyncIterator[bytes]:
    """Yields what has arrived, cut after its last complete event (one or more events
    per item, so a burst of tokens costs one write downstream)."""
    loop = asyncio.get_running_loop()
    wait = first
    buf = b""
    try:
        async with asyncio.timeout(None) as cm:
            while True:
                cm.reschedule(_sooner(loop.time(), wait or None, deadline))
                try:
                    data = await resp.content.readany()
                except aiohttp.ClientError as exc:
                    raise UpstreamError(
                        502, f"upstream stream failed: {type(exc).__name__}", "upstream_error"
                    ) from None
                if not data:  # end of the body
                    if buf.strip():
                        raise UpstreamError(
                            502, "upstream closed the stream mid-event", "upstream_error"
                        )
                    return
                buf += data.replace(b"\r\n", b"\n") if b"\r" in data else data
                cut = buf.rfind(b"\n\n")
                if cut < 0:
                    continue
                ready, buf = buf[: cut + 2], buf[cut + 2 :]
                wait = between
                yield ready
    except TimeoutError:
        raise UpstreamError(504, "upstream stopped sending tokens", "upstream_timeout") from None
    finally:
        resp.close()
