"""The response cache as the pipeline uses it: look a request up (exact first, then
semantic), store a miss's answer, bill a hit, invalidate, and count it all.

Hits and misses are counted per kind (``tokenplane_cache_requests_total``), and the
tokens and cost a hit saved (``tokenplane_cache_saved_tokens_total``,
``tokenplane_cache_saved_cost_micros_total``); ``tokenplane_cache_embed_seconds``
times the embedding of a user turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from tokenplane.cache.billing import HitCharge, hit_charge
from tokenplane.cache.entry import Entry
from tokenplane.cache.hits import EXACT, SEMANTIC, CacheFill, CacheHit
from tokenplane.cache.keys import Scope, exact_key, semantic_key
from tokenplane.cache.policy import CachePolicy
from tokenplane.cache.store import CacheStore
from tokenplane.config.cache_schema import CacheConfig
from tokenplane.embeddings.model import Embedder
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import UNPRICED, PriceBook
from tokenplane.observe.cells import CounterCells, HistogramCells
from tokenplane.upstream.sse import payload as sse_payload

EMBED_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class CacheMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = CounterCells(
            "tokenplane_cache_requests", "Cache lookups by cache kind and result (hit, "
            "miss): the hit rate is hits over lookups.", ["kind", "result", "tenant"],
            registry)
        self.saved_tokens = CounterCells(
            "tokenplane_cache_saved_tokens", "Tokens a cache hit did not send upstream "
            "(input: the prompt; output: the answer).", ["kind", "direction", "tenant"],
            registry)
        self.saved_cost = CounterCells(
            "tokenplane_cache_saved_cost_micros", "List price of the tokens cache hits "
            "saved, less what the hits were billed, in micro-units.",
            ["kind", "currency", "tenant"], registry)
        self.embed = HistogramCells(
            "tokenplane_cache_embed_seconds", "Time to embed a user turn for the "
            "semantic cache.", [], EMBED_BUCKETS, registry)


def _objects(payload: tuple[bytes, ...], stream: bool) -> list[Any]:
    """The JSON objects of a non-stream answer, or of a stream's events that carry
    usage or an error (the others are not parsed)."""
    if not stream:
        return [orjson.loads(payload[0])] if payload else []
    out = []
    for item in payload:
        for ev in item.split(b"\n\n"):
            if b'"usage"' in ev or b'"error"' in ev:
                data = sse_payload(ev + b"\n")
                if data is not None:
                    out.append(orjson.loads(data))
    return out


def answer_usage(payload: tuple[bytes, ...], stream: bool) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a complete answer; None when it has no usage, is
    not JSON or carries an error (such an answer is not cached)."""
    try:
        objs = _objects(payload, stream)
    except orjson.JSONDecodeError:
        return None
    found = None
    for obj in objs:
        if not isinstance(obj, dict) or "error" in obj:
            return None
        usage = obj.get("usage")
        if isinstance(usage, dict):
            prompt, out = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(out, int):
                found = (prompt, out)
    return found


class ResponseCache:
    """``version``: the model version of an alias's entries when the request's own is
    not known (no canary split chose one): its deployment (compose/cache.py)."""

    def __init__(self, config: CacheConfig, store: CacheStore, embedder: Embedder | None,
                 registry: CollectorRegistry, version: Callable[[str], str]) -> None:
        self.config = config
        self.policy = CachePolicy(config)
        self.store = store
        self.embedder = embedder
        self.metrics = CacheMetrics(registry)
        self.version = version

    @property
    def semantic_possible(self) -> bool:
        cfg = self.config
        return cfg.enabled and (cfg.semantic.enabled or any(r.semantic for r in cfg.rules))

    async def start(self) -> None:
        """Loads the embedding model off the event loop, when a semantic cache may run."""
        load = getattr(self.embedder, "load", None)
        if self.semantic_possible and load is not None:
            await asyncio.to_thread(load)

    async def close(self) -> None:
        await self.store.close()

    async def embed(self, text: str) -> Any:
        assert self.embedder is not None
        loop = asyncio.get_running_loop()
        start = loop.time()
        vec = (await asyncio.to_thread(self.embedder.embed, [text]))[0]
        self.metrics.embed.labels().observe(loop.time() - start)
        return vec

    async def lookup(self, tenant: str, app: str, alias: str, operation: str,
                     body: dict[str, Any], stream: bool, now: float,
                     version: str | None = None
                     ) -> tuple[CacheHit | None, CacheFill | None]:
        """The hit to serve, else what to store when the upstream has answered.
        ``version``: the model version routing chose for the request (a split's); the
        caller asks only for kinds whose answers may be cached (``Operation.cacheable``)."""
        decision = self.policy.decide(tenant, app, alias, body)
        if not (decision.exact or decision.semantic):
            return None, None
        scope = Scope(tenant, app, alias, version or self.version(alias))
        count = self.metrics.requests.labels
        key = exact_key(scope, operation, body, stream) if decision.exact else None
        if key is not None:
            entry = await self.store.get_exact(tenant, app, key, now)
            count(EXACT, "hit" if entry else "miss", tenant).inc()
            if entry is not None:
                return CacheHit(EXACT, entry), None
        skey = semantic_key(scope, operation, body, stream) if decision.semantic else None
        vec = None
        if skey is not None and self.embedder is not None:
            vec = await self.embed(skey.text)
            found = await self.store.nearest(tenant, app, skey.partition, vec,
                                             decision.threshold, now)
            count(SEMANTIC, "hit" if found else "miss", tenant).inc()
            if found is not None:
                return CacheHit(SEMANTIC, found[1], found[0]), None
        if key is None and skey is None:
            return None, None
        return None, CacheFill(scope, key, skey if vec is not None else None, vec)

    async def fill(self, fill: CacheFill, request_id: str, stream: bool,
                   payload: tuple[bytes, ...], now: float) -> bool:
        """Stores a complete answer (one with usage and no error); True if stored."""
        cfg = self.config
        if sum(len(p) for p in payload) > cfg.max_entry_bytes:
            return False
        usage = answer_usage(payload, stream)
        if usage is None:
            return False
        scope = fill.scope
        if fill.exact_key is not None:
            await self.store.put_exact(fill.exact_key, Entry(
                request_id, scope.tenant, scope.app, stream, payload, usage[0], usage[1],
                now, now + cfg.exact.ttl_s))
        if fill.semantic is not None and fill.vector is not None:
            await self.store.put_semantic(fill.semantic.partition, fill.vector, Entry(
                request_id, scope.tenant, scope.app, stream, payload, usage[0], usage[1],
                now, now + cfg.semantic.ttl_s))
        return True

    def charge(self, hit: CacheHit, model: str, response_model: str, saved_input: int,
               prices: PriceBook | None) -> HitCharge:
        """What a hit is billed (``cache/billing.py``) at ``prices``: the saved tokens'
        list price, and the billing rule's share of it and of the tokens."""
        full, version, currency = 0, UNPRICED, ""
        if prices is not None:
            probe = UsageEvent("", 0, 0.0, model=model, response_model=response_model,
                               input_tokens=saved_input, output_tokens=hit.entry.output_tokens)
            full, version = prices.cost(probe)
            currency = prices.currency
        return hit_charge(self.config.billing, saved_input, hit.entry.output_tokens, full,
                          currency, version)

    def bill(self, event: UsageEvent, hit: CacheHit, saved_input: int,
             charge: HitCharge) -> None:
        """Marks the ledger event of a hit: its kind, source request, the tokens it saved
        and their list price, and what it is billed (free or the discounted share)."""
        event.cache = hit.kind
        event.cache_source_request_id = hit.entry.request_id
        event.saved_input_tokens = saved_input
        event.saved_output_tokens = hit.entry.output_tokens
        if charge.currency:
            event.currency = charge.currency
        event.cost_micros = charge.cost_micros
        event.saved_cost_micros = charge.saved_micros
        event.price_version = charge.price_version
        m = self.metrics
        m.saved_tokens.labels(hit.kind, "input", event.tenant).inc(saved_input)
        m.saved_tokens.labels(hit.kind, "output", event.tenant).inc(hit.entry.output_tokens)
        if event.saved_cost_micros:
            m.saved_cost.labels(hit.kind, event.currency, event.tenant).inc(
                event.saved_cost_micros)

    async def invalidate(self, tenant: str, app: str | None) -> int:
        return await self.store.invalidate(tenant, app)
