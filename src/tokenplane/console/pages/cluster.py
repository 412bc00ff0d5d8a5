"""Cluster (admin keys): replicas per pool with their queue, KV cache use, prefix
cache hit rate and breaker state (the routing's live view), and the autoscaler's
decisions and forecast when the gateway has one (``/admin/v1/autoscale``)."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page
from tokenplane.console.periods import label


def _hit_rate(figures: Any) -> float | None:
    if figures is None:
        return None
    rate = getattr(figures, "prefix_hit_rate", None)
    if callable(rate):
        rate = rate()
    if rate is None:
        queries = getattr(figures, "prefix_queries", None)
        hits = getattr(figures, "prefix_hits", None)
        rate = hits / queries if queries and hits is not None else None
    return None if rate is None else round(100 * float(rate), 1)


async def build(page: Page) -> Data:
    page.require_admin()
    pools: dict[str, list[dict[str, Any]]] = {}
    routing = page.parts.routing
    if routing is not None:
        for alias, eps in sorted(routing.live.by_alias.items()):
            for le in eps:
                snap = le.snapshot(page.now)
                pools.setdefault(alias, []).append({
                    "id": le.id, "version": le.model_version or "-",
                    "healthy": le.healthy, "breaker": snap.breaker_state,
                    "running": snap.num_running, "queue": snap.queue_depth,
                    "in_flight": snap.inflight_requests,
                    "kv_use": round(100 * snap.kv_usage, 1),
                    "prefix_hit_rate": _hit_rate(le.engine_figures()),
                })
    auto = await page.admin_api("/admin/v1/autoscale")
    autoscale = auto.data if auto.ok and auto.data.get("enabled") else None
    if autoscale is not None:
        for d in autoscale.get("decisions") or []:
            at = d.get("at")
            d["at_label"] = label(int(at), "second") if isinstance(at, int | float) else ""
    return {"pools": pools, "autoscale": autoscale}
