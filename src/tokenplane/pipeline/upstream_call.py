"""The upstream stage: send to the chosen replica, relay its answer, record timings.

Streams are relayed event by event as the upstream's bytes; each event is parsed only
for timing, usage and the text needed to count tokens if the client goes away. The
upstream is always asked for usage; the usage chunk reaches the client only if the
client asked for it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from tokenplane.api.errors import ApiError
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.stages import pick_least_loaded
from tokenplane.upstream.sse import DONE, frame, payload
from tokenplane.upstream.types import UpstreamError, UpstreamRequest, UpstreamResponse

RETRYABLE = frozenset({502, 503})


def upstream_body(ctx: RequestContext) -> bytes:
    assert ctx.endpoint is not None
    body = dict(ctx.body)
    body["model"] = ctx.endpoint.upstream_model
    if ctx.stream:
        body["stream_options"] = {"include_usage": True}
    return orjson.dumps(body)


def _error_from_upstream(status: int, body: bytes | None) -> ApiError:
    message, code = f"upstream returned HTTP {status}", "upstream_error"
    try:
        err = orjson.loads(body or b"{}").get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            message = err["message"]
            code = err.get("code") or code
    except (orjson.JSONDecodeError, AttributeError):
        pass
    if 400 <= status < 500 and status not in (401, 403, 404, 429):
        return ApiError(status, message, code=str(code))
    if status == 429:
        return ApiError(429, message, code="upstream_rate_limited")
    mapped = 504 if status == 504 else 503 if status == 503 else 502
    return ApiError(mapped, f"upstream failed: {message}", code="upstream_error")


class UpstreamCall:
    """Sends the request, retrying on another replica only before any token was sent."""

    def __init__(self, max_attempts: int = 2) -> None:
        self.max_attempts = max_attempts

    async def send(self, ctx: RequestContext, on_attempt_failed: Any) -> UpstreamResponse:
        tried: list[str] = []
        while True:
            assert ctx.endpoint is not None and ctx.pool is not None
            ep = ctx.endpoint
            req = UpstreamRequest(
                path=ctx.path, body=upstream_body(ctx), stream=ctx.stream,
                timeouts=ep.backend.timeouts, headers={"x-request-id": ctx.request_id},
            )
            ctx.upstream_start = time.time()
            ep.in_flight += 1
            try:
                resp = await ep.transport.send(req)
                failure: ApiError | None = None
                if resp.status >= 400:
                    failure = _error_from_upstream(resp.status, resp.body)
                    await resp.aclose()
            except UpstreamError as exc:
                failure = ApiError(exc.status, exc.message, code=exc.code)
            if failure is None:
                return resp
            ep.in_flight -= 1
            ep.failures += 1
            tried.append(ep.id)
            retry = failure.status in RETRYABLE and ctx.attempt + 1 < self.max_attempts
            if retry and len(tried) < len(ctx.pool.endpoints):
                await on_attempt_failed(ctx, failure)
                ctx.attempt += 1
                ctx.endpoint = pick_least_loaded(ctx.pool, exclude=tuple(tried))
                continue
            raise failure


def absorb_json(ctx: RequestContext, body: bytes) -> None:
    """Reads usage and the response model from a non-stream answer."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return
    if isinstance(obj, dict):
        usage = obj.get("usage")
        if isinstance(usage, dict):
            ctx.usage = usage
        model = obj.get("model")
        if isinstance(model, str):
            ctx.response_model = model


async def relay(ctx: RequestContext, resp: UpstreamResponse) -> AsyncIterator[bytes]:
    """Relays upstream SSE events to the client; sets status on error or disconnect."""
    assert resp.events is not None
    done = False
    try:
        async for event in resp.events:
            data = payload(event)
            if data is None:
                continue
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            if "error" in obj:
                ctx.status, ctx.error_code = "error", "upstream_error"
                yield event
                continue
            usage = obj.get("usage")
            if isinstance(usage, dict):
                ctx.usage = usage
            choices = obj.get("choices")
            if ctx.response_model is None and isinstance(obj.get("model"), str):
                ctx.response_model = obj["model"]
            if choices:
                _absorb_delta(ctx, choices)
                yield event
            elif usage is not None and ctx.include_usage:
                yield event
        done = True
        yield DONE
    except UpstreamError as exc:
        ctx.status, ctx.error_code, ctx.http_status = "error", exc.code, exc.status
        yield frame(ApiError(exc.status, exc.message, code=exc.code).envelope())
        yield DONE
        done = True
    finally:
        if not done and ctx.status == "ok":
            ctx.status, ctx.error_code, ctx.http_status = "cancelled", "client_disconnected", 499
        await resp.aclose()


def _absorb_delta(ctx: RequestContext, choices: list[Any]) -> None:
    now = time.time()
    ch = choices[0] if isinstance(choices[0], dict) else {}
    delta = ch.get("delta")
    text: Any = delta.get("content") if isinstance(delta, dict) else ch.get("text")
    reasoning: Any = delta.get("reasoning_content") if isinstance(delta, dict) else None
    if text or reasoning:
        if ctx.first_token is None:
            ctx.first_token = now
        ctx.last_token = now
        ctx.chunks += 1
        if isinstance(text, str) and text:
            ctx.output_parts.append(text)
        if isinstance(reasoning, str) and reasoning:
            ctx.reasoning_parts.append(reasoning)
