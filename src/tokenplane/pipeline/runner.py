"""The pipeline: stages in order, the upstream call, and the finishers.

Finishers (metering first) run exactly once per request whatever happens. A usage
record is made durable before the client sees the end of its answer (the body of a
non-stream response, the ``[DONE]`` of a stream), so a request the client saw
complete is never missing from the ledger.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from tokenplane.dialects.base import StreamRenderer
from tokenplane.errors import GatewayError
from tokenplane.pipeline.client_watch import ClientGone
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.context_stage import with_extension
from tokenplane.pipeline.stages import Finisher, Stage
from tokenplane.pipeline.upstream_call import Call, absorb_json, relay
from tokenplane.upstream.sse import DONE
from tokenplane.upstream.types import UpstreamResponse

log = logging.getLogger("tokenplane.pipeline")


@dataclass(slots=True)
class Reply:
    """``abandon``: for a stream that is never iterated (its client left before its
    head could be written): cancels the upstream and runs the finishers, which the
    stream's own ``finally`` would have done had it started."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    stream: AsyncIterator[bytes] | None = None
    abandon: Callable[[], Awaitable[None]] | None = None
    # the client's dialect's rendering of the canonical stream, applied by the writer
    # to what it writes (None: the canonical bytes as they are)
    render: StreamRenderer | None = None


class Pipeline:
    def __init__(
        self,
        stages: Sequence[Stage],
        call: Call,
        finishers: Sequence[Finisher],
        attempt_finishers: Sequence[Finisher] = (),
    ) -> None:
        self.stages = list(stages)
        self.call = call
        self.finishers = list(finishers)
        self.attempt_finishers = list(attempt_finishers)

    async def _finish(self, ctx: RequestContext) -> None:
        for f in self.finishers:
            try:
                await f.finish(ctx)
            except Exception:  # a finisher must never hide the request's outcome
                log.exception("finisher %s failed for %s", type(f).__name__, ctx.request_id)

    async def _attempt_failed(self, ctx: RequestContext, err: GatewayError) -> None:
        saved = (ctx.status, ctx.http_status, ctx.error_code)
        ctx.status, ctx.http_status, ctx.error_code = "error", err.status, err.code
        for f in self.attempt_finishers:
            try:
                await f.finish(ctx)
            except Exception:
                log.exception("attempt finisher failed for %s", ctx.request_id)
        ctx.status, ctx.http_status, ctx.error_code = saved

    async def handle(self, ctx: RequestContext) -> Reply:
        try:
            for stage in self.stages:
                await stage.run(ctx)
            resp = await self.call.send(ctx, self._attempt_failed)
        except GatewayError as err:
            ctx.status = "cancelled" if isinstance(err, ClientGone) else "error"
            ctx.http_status, ctx.error_code = err.status, err.code
            await self._finish(ctx)
            for name, value in ctx.response_headers.items():
                err.headers.setdefault(name, value)
            raise
        if resp.events is None:
            body = resp.body or b""
            ctx.http_status = resp.status
            absorb_json(ctx, body)
            if ctx.reply_extra is not None and resp.status < 400:
                if ctx.settling is not None:
                    await ctx.settling  # the packed documents' accounting
                body = with_extension(body, ctx.reply_extra)
            self._release(ctx)
            await self._finish(ctx)
            return Reply(resp.status, {**resp.headers, **ctx.response_headers}, body=body)
        return Reply(resp.status, {"content-type": "text/event-stream", **ctx.response_headers},
                     stream=self._stream(ctx, relay(ctx, resp)),
                     abandon=partial(self._abandon, ctx, resp))

    async def _abandon(self, ctx: RequestContext, resp: UpstreamResponse) -> None:
        if ctx.status == "ok":
            ctx.status, ctx.error_code, ctx.http_status = "cancelled", "client_disconnected", 499
        await resp.aclose()
        self._release(ctx)
        await self._finish(ctx)

    def _release(self, ctx: RequestContext) -> None:
        if ctx.endpoint is not None:
            ctx.endpoint.in_flight -= 1
            ctx.endpoint.served += 1

    async def _stream(
        self, ctx: RequestContext, events: AsyncIterator[bytes]
    ) -> AsyncIterator[bytes]:
        finished = False
        try:
            async for event in events:
                if event is DONE:
                    self._release(ctx)
                    finished = True
                    await self._finish(ctx)
                yield event
        finally:
            if not finished:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
                self._release(ctx)
                await self._finish(ctx)
