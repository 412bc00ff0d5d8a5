"""Transport to an OpenAI-compatible server over HTTP (vLLM, SGLang, OpenAI, ...).

One pool of keep-alive HTTP/1.1 connections per upstream (``upstream/http1_client.py``).
Timeouts (``config.schema.TimeoutConfig``): connect; a stream's head and first event
(``first_token``) or a non-stream answer's head (``non_stream_head``); the longest
silence after that (``between_tokens``); the whole call (``total``). SSE events are
split on blank lines and handed on as bytes, never re-encoded.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

from tokenplane.upstream.http1_client import H1ConnectError, H1Connection, H1Error, H1Pool
from tokenplane.upstream.types import UpstreamError, UpstreamRequest, UpstreamResponse

_HOP_HEADERS = ("content-type", "x-request-id", "openai-processing-ms")


_VERSIONED = re.compile(r"/v\d+(?:[a-z]+\d*)?$")  # /v1, /v2, /v1beta, /v1alpha2


def versioned(base_url: str) -> bool:
    """Whether a base URL ends in an API version (``https://api.openai.com/v1``,
    ``.../compatible-mode/v1``), as the OpenAI SDK and providers write them."""
    return _VERSIONED.search(urlsplit(base_url).path.rstrip("/")) is not None


def server_root(base_url: str) -> str:
    """The base URL without a trailing API version: where ``/metrics`` lives."""
    base = base_url.rstrip("/")
    return base[: base.rfind("/")] if versioned(base) else base


class HttpTransport:
    """``base_url`` either names the server root (vLLM, SGLang: the request's own path
    ``/v1/chat/completions`` is appended) or ends in the API version as the OpenAI SDK
    has it (``https://api.example.com/v1``, ``.../compatible-mode/v1``): then the
    version is the base's, and the request's leading ``/v1`` is not sent twice."""

    def __init__(self, base_url: str, api_key_env: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key_env = api_key_env
        self._pool = H1Pool(self.base_url)
        self._strip = "/v1" if versioned(self.base_url) else ""

    def _headers(self, req: UpstreamRequest) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "*/*", **req.headers}
        if self._api_key_env:
            key = os.environ.get(self._api_key_env)
            if key:
                headers["authorization"] = f"Bearer {key}"
        return headers

    async def send(self, req: UpstreamRequest) -> UpstreamResponse:
        t = req.timeouts
        loop = asyncio.get_running_loop()
        deadline = loop.time() + t.total if t.total else None
        # the head must come within first_token (a stream: with its first event) or
        # non_stream_head (a whole answer's head comes with its body); then the body
        # may fall silent for at most between_tokens
        first = (t.first_token if req.stream else t.non_stream_head) or None
        conn: H1Connection | None = None
        waited = "a response"
        try:
            async with asyncio.timeout_at(_sooner(loop.time(), first, deadline)):
                path = req.path
                if self._strip and path.startswith("/v1/"):
                    path = path[3:]
                conn = await self._pool.request("POST", path, self._headers(req), req.body,
                                                t.connect or None)
                status, headers = await conn.head()
                if not req.stream or status >= 400:
                    waited = "the rest of the answer"
                    body = await conn.read_all(t.between_tokens or None)  # and the above
                    self._pool.release(conn)
                    conn = None  # the pool's again
                    return UpstreamResponse(status, _pick(headers), body=body)
        except TimeoutError:
            _drop(conn)
            raise UpstreamError(
                504, f"upstream timed out waiting for {waited}", "upstream_timeout"
            ) from None
        except H1ConnectError as exc:
            raise UpstreamError(
                503, f"upstream unreachable: {exc}", "upstream_unavailable"
            ) from None
        except H1Error as exc:
            _drop(conn)
            raise UpstreamError(502, f"upstream failed: {exc}", "upstream_error") from None
        except BaseException:  # cancelled (the client left): the upstream must see it
            _drop(conn)
            raise
        assert conn is not None
        lease = _Lease(self._pool, conn)
        return UpstreamResponse(
            status, _pick(headers),
            events=_events(lease, t.first_token, t.between_tokens, deadline), close=lease.aclose,
        )

    async def close(self) -> None:
        self._pool.close()


class _Lease:
    """A streaming answer's hold on its connection: given back to the pool when the
    whole body was read, closed otherwise; after either, the connection is no longer
    this answer's (it may already carry another request)."""

    def __init__(self, pool: H1Pool, conn: H1Connection) -> None:
        self.pool = pool
        self.conn: H1Connection | None = conn

    def give_back(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self.pool.release(conn)

    def drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        self.drop()


def _drop(conn: H1Connection | None) -> None:
    if conn is not None:
        conn.close()


def _sooner(now: float, delay: float | None, deadline: float | None) -> float | None:
    cands = [d for d in (now + delay if delay else None, deadline) if d is not None]
    return min(cands) if cands else None


def _pick(headers: Mapping[str, str]) -> dict[str, str]:
    return {h: headers[h] for h in _HOP_HEADERS if h in headers}


async def _events(
    lease: _Lease, first: float, between: float, deadline: float | None
) -> AsyncIterator[bytes]:
    """Yields what has arrived, cut after its last complete event (one or more events
    per item, so a burst of tokens costs one write downstream)."""
    loop = asyncio.get_running_loop()
    wait = first
    buf = b""
    done = False
    try:
        async with asyncio.timeout(None) as cm:
            while True:
                cm.reschedule(_sooner(loop.time(), wait or None, deadline))
                if lease.conn is None:  # closed by the consumer meanwhile
                    return
                try:
                    data = await lease.conn.read_some()
                except H1Error as exc:
                    raise UpstreamError(
                        502, f"upstream stream failed: {exc}", "upstream_error"
                    ) from None
                if not data:  # end of the body
                    if buf.strip():
                        raise UpstreamError(
                            502, "upstream closed the stream mid-event", "upstream_error"
                        )
                    done = True
                    return
                buf += data.replace(b"\r\n", b"\n") if b"\r" in data else data
                cut = buf.rfind(b"\n\n")
                if cut < 0:
                    continue
                ready, buf = buf[: cut + 2], buf[cut + 2 :]
                wait = between
                # while the consumer holds the events (a slow client: back-pressure),
                # the upstream is not silent: no deadline runs until it asks again
                # (the client's own stall time ends a client that reads nothing)
                cm.reschedule(None)
                yield ready
    except TimeoutError:
        raise UpstreamError(504, "upstream stopped sending tokens", "upstream_timeout") from None
    finally:
        if done:
            lease.give_back()  # the whole answer was read: keep the connection
        else:
            lease.drop()
