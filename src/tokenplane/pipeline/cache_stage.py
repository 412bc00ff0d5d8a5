"""The response cache in the pipeline (docs/CACHE.md).

Where it sits, and why: the lookup is a stage after the input guard, the tokens stage
and admission, so a hit has been authenticated, validated, screened and masked like any
request (the key is taken from the body *as the guard left it*, so a masked prompt is
looked up masked) and is admitted against the tenant's limits; and before the
scheduler and the router, so a hit neither queues for a replica nor loads one. The
serving is a :class:`CachedCall` inside the output guard's wrapper: a hit is replayed
as the upstream answer would have been, so the output guard applies to it as
configured and the relay frames it exactly as a live stream (the stored items are the
upstream's own). A miss's answer is stored as it came from the upstream, before the
client sees its end (the body, or the stream's last event), only when it completed
with usage and no error.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from tokenplane.cache.billing import HitCharge
from tokenplane.cache.gateway.service import ResponseCache
from tokenplane.cache.hits import CacheFill, CacheHit
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import PriceBook
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.stages import Stage
from tokenplane.pipeline.upstream_call import Call
from tokenplane.upstream.types import UpstreamResponse

CACHE_HEADER = "x-tokenplane-cache"
SOURCE_HEADER = "x-tokenplane-cache-source"


class CacheStage:
    """``version``: the model version routing will use for the request (a canary
    split's choice, made once and kept on the request; None: no split)."""

    def __init__(self, cache: ResponseCache,
                 version: Callable[[RequestContext], str | None] | None = None) -> None:
        self.cache = cache
        self.version = version

    async def run(self, ctx: RequestContext) -> None:
        p = ctx.principal
        if p is None or ctx.alias is None or not ctx.operation.cacheable:
            return
        version = self.version(ctx) if self.version is not None else None
        hit, fill = await self.cache.lookup(
            p.tenant, p.app or "", ctx.alias, ctx.operation.name, ctx.body, ctx.stream,
            time.time(), version)
        ctx.cache_hit, ctx.cache_fill = hit, fill
        if hit is not None:
            ctx.response_headers[CACHE_HEADER] = hit.kind
            ctx.response_headers[SOURCE_HEADER] = hit.entry.request_id
            if "cache_hit" not in ctx.flags:
                ctx.flags.append("cache_hit")


class UnlessHit:
    """A stage that a cache hit skips (the scheduler, the router)."""

    def __init__(self, inner: Stage) -> None:
        self.inner = inner

    async def run(self, ctx: RequestContext) -> None:
        if ctx.cache_hit is None:
            await self.inner.run(ctx)


async def _replay(items: tuple[bytes, ...]) -> AsyncIterator[bytes]:
    for item in items:
        yield item


def replayed(hit: CacheHit) -> UpstreamResponse:
    """The cached answer as an upstream response."""
    entry = hit.entry
    if entry.stream:
        return UpstreamResponse(200, {"content-type": "text/event-stream"},
                                events=_replay(entry.payload))
    return UpstreamResponse(200, {"content-type": "application/json"},
                            body=entry.payload[0])


class CachedCall:
    """Serves a hit without the upstream; on a miss, calls it and stores the answer."""

    def __init__(self, inner: Call, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache

    async def send(self, ctx: RequestContext, on_attempt_failed: Any) -> UpstreamResponse:
        hit = ctx.cache_hit
        if hit is not None:
            return replayed(hit)
        resp = await self.inner.send(ctx, on_attempt_failed)
        fill = ctx.cache_fill
        if fill is None or resp.status != 200:
            return resp
        if resp.events is None:
            if resp.body:
                await self.cache.fill(fill, ctx.request_id, False, (resp.body,), time.time())
        else:
            resp.events = self._tee(ctx, fill, resp.events)
        return resp

    async def _tee(self, ctx: RequestContext, fill: CacheFill,
                   events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Passes the upstream's items on and keeps them; stores them once the stream
        has ended by itself (not when the relay stopped early: a client that left, a
        budget)."""
        kept: list[bytes] = []
        async for item in events:
            kept.append(item)
            yield item
        await self.cache.fill(fill, ctx.request_id, True, tuple(kept), time.time())


class CacheBilling:
    """A hit's charge, for the meter (its ledger event) and admission (its settlement):
    computed once per request by the cache's billing rule at the prices in force
    (``prices``: the meter's current price book), so both see the same amounts."""

    def __init__(self, cache: ResponseCache, prices: Callable[[], PriceBook | None]) -> None:
        self.cache = cache
        self.prices = prices

    def charge(self, ctx: RequestContext) -> HitCharge | None:
        """What the request's hit is billed (None: not a hit)."""
        hit = ctx.cache_hit
        if hit is None:
            return None
        found = ctx.cache_charge
        if found is None:
            found = ctx.cache_charge = self.cache.charge(
                hit, ctx.alias or "unknown", ctx.response_model or "",
                ctx.estimated_input_tokens, self.prices())
        return found

    def bill_hit(self, event: UsageEvent, ctx: RequestContext) -> None:
        charge = self.charge(ctx)
        if ctx.cache_hit is not None and charge is not None:
            self.cache.bill(event, ctx.cache_hit, ctx.estimated_input_tokens, charge)
