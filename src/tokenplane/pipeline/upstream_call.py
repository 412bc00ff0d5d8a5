"""The upstream stage: send to the chosen replica, relay its answer, record timings.

Streams are relayed event by event as the upstream's bytes; each event is parsed only
for timing and usage; the text needed to count tokens if the client goes away is kept
as text (``pipeline/relayed.py``), not as the events. The
upstream is always asked for usage; the usage chunk reaches the client only if the
client asked for it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import orjson

from tokenplane.dialects.extensions import strip_extensions
from tokenplane.errors import GatewayError, envelope
from tokenplane.pipeline.client_watch import ClientGone, StreamWatch, watched
from tokenplane.pipeline.context import RequestContext, StreamGuard
from tokenplane.pipeline.relayed import RelayedText, parse_event
from tokenplane.pipeline.upstream_errors import upstream_failure
from tokenplane.sessions.tool_calls import answer_tool_calls, chunk_tool_calls
from tokenplane.upstream.pool import Endpoint, pick_least_loaded
from tokenplane.upstream.sse import DONE, frame
from tokenplane.upstream.types import UpstreamError, UpstreamRequest, UpstreamResponse

RETRYABLE = frozenset({502, 503})


def upstream_body(ctx: RequestContext) -> bytes:
    """The canonical request as the chosen replica is sent it: its model name, usage
    always asked for, and a dialect's extensions kept only for a backend that reads
    them (``dialects/extensions.py``)."""
    assert ctx.endpoint is not None
    body = dict(ctx.body)
    if ctx.operation.dialect.renders and not getattr(ctx.endpoint.transport,
                                                     "keeps_extensions", False):
        body = strip_extensions(body)
    body["model"] = ctx.endpoint.upstream_model
    if ctx.stream:
        body["stream_options"] = {"include_usage": True}
    return orjson.dumps(body)


class AttemptRouter(Protocol):
    """Routing's hooks into the upstream call (pipeline/route_stage.py implements it)."""

    def retry(self, ctx: RequestContext, tried: list[str]) -> tuple[str, Endpoint] | None: ...

    def bind(self, ctx: RequestContext, alias: str, ep: Endpoint) -> None: ...

    def record(self, ep: Endpoint, failure_status: int | None, cancelled: bool = False) -> None:
        ...


class Call(Protocol):
    """What the runner calls between the stages and the finishers: send the request
    upstream (retrying as it sees fit) and return the answer."""

    async def send(self, ctx: RequestContext, on_attempt_failed: Any) -> UpstreamResponse: ...


class UpstreamCall:
    """Sends the request, retrying on another replica only before any token was sent.

    With a ``router``, each attempt's outcome feeds the replica's breaker and a retry
    goes where routing says (another replica, or a fallback alias's). A failed
    attempt sent nothing to the client and is billed zero (its ``upstream_start``
    is cleared before the attempt finishers run).
    """

    def __init__(self, max_attempts: int = 2, router: AttemptRouter | None = None) -> None:
        self.max_attempts = max_attempts
        self.router = router

    async def send(self, ctx: RequestContext, on_attempt_failed: Any) -> UpstreamResponse:
        tried: list[str] = []
        while True:
            assert ctx.endpoint is not None and ctx.pool is not None
            ep = ctx.endpoint
            req = UpstreamRequest(
                path=ctx.operation.upstream_path, body=upstream_body(ctx), stream=ctx.stream,
                timeouts=ep.backend.timeouts, headers={"x-request-id": ctx.request_id},
                client_headers=ctx.headers,
            )
            link = ctx.client
            if link is not None and link.gone:  # left while the stages ran
                raise ClientGone()
            ctx.upstream_start = time.time()
            ep.in_flight += 1
            try:
                resp = await watched(link, ep.transport.send(req))
                failure: GatewayError | None = None
                if resp.status >= 400:
                    failure = upstream_failure(resp.status, resp.body, ep, ctx.request_id,
                                               ctx.body.keys())
                    await resp.aclose()
            except UpstreamError as exc:
                failure = GatewayError(exc.status, exc.message, code=exc.code)
            except BaseException:  # the client left (ClientGone), or a shutdown
                ep.in_flight -= 1
                if self.router is not None:
                    self.router.record(ep, None, cancelled=True)
                raise
            if self.router is not None:
                self.router.record(ep, failure.status if failure is not None else None)
            if failure is None:
                return resp
            ep.in_flight -= 1
            ep.failures += 1
            tried.append(ep.id)
            ctx.upstream_start = None  # nothing came back: the attempt is billed zero
            retry = failure.status in RETRYABLE and ctx.attempt + 1 < self.max_attempts
            if retry and self.router is not None:
                nxt = self.router.retry(ctx, tried)
                if nxt is None:
                    raise failure
                await on_attempt_failed(ctx, failure)
                ctx.attempt += 1
                self.router.bind(ctx, *nxt)
                continue
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
        else:  # the meter counts the answer itself (usage_source=estimated)
            ctx.response_text = ctx.operation.answer_text(obj)
        model = obj.get("model")
        if isinstance(model, str):
            ctx.response_model = model
        ctx.tool_calls = answer_tool_calls(obj)
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict):
                    note_finish(ctx, choice.get("finish_reason"))


def note_finish(ctx: RequestContext, reason: object) -> None:
    """Keeps the answer's finish reason: the first one seen, or ``length`` when any
    choice stopped at ``max_tokens`` (the advisor counts those)."""
    if isinstance(reason, str) and (ctx.finish_reason is None or reason == "length"):
        ctx.finish_reason = reason


_FINISH = re.compile(rb'"finish_reason"\s*:\s*"([a-z_]{1,32})"')




async def relay(ctx: RequestContext, resp: UpstreamResponse) -> AsyncIterator[bytes]:
    """Relays upstream SSE events to the client; sets status on error or disconnect.

    Each item from the upstream holds one or more complete events; what it yields is
    the same bytes minus the upstream's ``[DONE]`` (sent once at the end) and the
    usage-only chunk when the client did not ask for usage. Events are parsed only
    when they may carry usage or an error, or until the first token was seen.
    """
    events = resp.events
    assert events is not None
    done = False
    guard = ctx.stream_guard
    relayed = ctx.relayed = RelayedText(ctx.operation)
    link = ctx.client
    watch = StreamWatch(link) if link is not None else None
    try:
        while True:
            if watch is not None:
                if watch.left:
                    break
                watch.armed = True  # the client leaving now cancels the wait below
            try:
                chunk = await anext(events)
            except StopAsyncIteration:
                break
            except asyncio.CancelledError:
                if watch is not None and watch.took_back():
                    break  # the client left during the upstream's silence
                raise
            finally:
                if watch is not None:
                    watch.armed = False
            out = [ev for ev in chunk.split(b"\n\n") if ev and _keep(ctx, ev)]
            stop = False
            if guard is not None and ctx.chunks > guard.covered:
                out, stop = await _guarded(ctx, guard, out, relayed.pending)
            relayed.settle()
            if out:
                out.append(b"")
                yield b"\n\n".join(out)
            if stop:  # the budget ran out: cancel the upstream, end the stream cleanly
                await resp.aclose()
                yield budget_end_events(ctx, guard.end_note() if guard else {})
                break
        if watch is not None and watch.left:
            return  # cancelled (below); nobody reads what would follow
        done = True
        yield DONE
    except UpstreamError as exc:
        ctx.status, ctx.error_code, ctx.http_status = "error", exc.code, exc.status
        yield frame(envelope(GatewayError(exc.status, exc.message, code=exc.code)))
        yield DONE
        done = True
    finally:
        if link is not None:
            link.on_gone(None)
        if not done and ctx.status == "ok":
            code = ("client_stalled" if link is not None and link.stalled
                    else "client_disconnected")
            ctx.status, ctx.error_code, ctx.http_status = "cancelled", code, 499
        await resp.aclose()


async def _guarded(
    ctx: RequestContext, guard: StreamGuard, out: list[bytes], counted: list[bytes]
) -> tuple[list[bytes], bool]:
    """Asks the guard to cover the content events just absorbed, *before* they are
    forwarded (one token per content event). Returns the events that may be sent and
    whether the stream must end; refused events stay counted (they were generated
    and are billed) but are not forwarded."""
    if await guard.extend(ctx.chunks):
        return out, False
    excess = ctx.chunks - guard.covered
    kept: list[bytes] = []
    dropped = 0
    for ev in reversed(out):  # drop the uncovered content events, newest first
        if dropped < excess and len(counted) > dropped and ev is counted[-1 - dropped]:
            dropped += 1
            continue
        kept.append(ev)
    kept.reverse()
    return kept, True


def budget_end_events(ctx: RequestContext, note: dict[str, Any]) -> bytes:
    """The closing events of a stream a budget ended: a chunk with
    ``finish_reason: "length"`` (and a ``tokenplane`` field saying why), then an SSE
    comment line that OpenAI clients ignore."""
    newest = ctx.relayed.last if ctx.relayed is not None else None
    last = parse_event(newest) if newest is not None else None
    base = last or {}
    op = ctx.operation
    obj: dict[str, Any] = {
        "id": base.get("id") or f"chatcmpl-{ctx.request_id}",
        "object": op.chunk_object,
        "created": base.get("created") or int(time.time()),
        "model": base.get("model") or ctx.response_model or ctx.alias or "",
        "choices": [op.end_choice("length")],
        "tokenplane": {"stopped_by": "budget", **note},
    }
    comment = b": tokenplane stream ended by budget"
    code = note.get("code")
    if isinstance(code, str):
        comment += b" (" + code.encode() + b")"
    return b"data: " + orjson.dumps(obj) + b"\n\n" + comment + b"\n\n"


def _keep(ctx: RequestContext, ev: bytes) -> bool:
    """Absorbs one event into ``ctx``; True when it is to be passed to the client."""
    if ev.startswith(b"data: [DONE]") or not ev.startswith(b"data:"):
        return False
    if b'"tool_calls"' in ev:
        call = parse_event(ev)
        if call is not None:
            ctx.tool_calls += chunk_tool_calls(call)
    if b'"finish_reason":"' in ev or b'"finish_reason": "' in ev:
        for reason in _FINISH.findall(ev):
            note_finish(ctx, reason.decode())
    if b'"usage":{' in ev or b'"usage": {' in ev or b'"error"' in ev or ctx.first_token is None:
        obj = parse_event(ev)
        if obj is None:
            return False
        if "error" in obj:
            ctx.status, ctx.error_code = "error", "upstream_error"
            return True
        usage = obj.get("usage")
        if isinstance(usage, dict):
            ctx.usage = usage
        if ctx.response_model is None and isinstance(obj.get("model"), str):
            ctx.response_model = obj["model"]
        choices = obj.get("choices")
        if not choices:
            return usage is not None and ctx.include_usage
        if ctx.first_token is None and not ctx.operation.chunk_has_text(choices):
            return True  # the role-only opening chunk
    now = time.time()
    if ctx.first_token is None:
        ctx.first_token = now
    ctx.last_token = now
    ctx.chunks += 1
    relayed = ctx.relayed
    assert relayed is not None  # relay() made it
    relayed.add(ev)
    return True


def relayed_text(ctx: RequestContext) -> tuple[str, str]:
    """The visible and reasoning text relayed so far (to count it when the upstream
    reported no usage, e.g. when the client went away)."""
    return ctx.relayed.text() if ctx.relayed is not None else ("", "")
