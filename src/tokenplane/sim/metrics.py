"""Figures of one simulated run: SLO attainment, latency percentiles, cache, fairness."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tokenplane.sim.cluster import RequestRecord


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); NaN for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return s[k]


def jain_index(xs: Iterable[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1.0 is perfectly even."""
    v = list(xs)
    if not v:
        return 1.0
    sq = sum(x * x for x in v)
    if sq == 0:
        return 1.0
    return sum(v) ** 2 / (len(v) * sq)


def oracle_prefix_hit_rate(records: Iterable[RequestRecord], block_size: int) -> float:
    """Hit rate of one unlimited prefix cache shared by the whole cluster, in
    arrival order (prompt tokens found cached / prompt tokens)."""
    seen: set[int] = set()
    hits = 0
    total = 0
    for rec in sorted(records, key=lambda r: r.req.arrival):
        r = rec.req
        total += r.prompt_tokens
        n = 0
        limit = (r.prompt_tokens - 1) // block_size
        for h in r.block_hashes[:limit]:
            if h not in seen:
                break
            n += 1
        hits += n * block_size
        seen.update(r.block_hashes)
    return hits / total if total else 0.0


def lru_prefix_hit_rate(
    requests: Iterable[tuple[int, Sequence[int]]], block_size: int, capacity_blocks: int
) -> float:
    """Hit rate of one shared LRU prefix cache of ``capacity_blocks`` blocks, for
    ``(prompt_tokens, block_hashes)`` in arrival order; every prompt block is
    inserted after its lookup (as if requests ran one at a time)."""
    from collections import OrderedDict

    lru: OrderedDict[int, None] = OrderedDict()
    hits = 0
    total = 0
    for prompt, hashes in requests:
        total += prompt
        limit = (prompt - 1) // block_size
        n = 0
        for h in hashes[:limit]:
            if h not in lru:
                break
            n += 1
        hits += n * block_size
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
        while len(lru) > capacity_blocks:
            lru.popitem(last=False)
    return hits / total if total else 0.0


def _latency(recs: Sequence[RequestRecord]) -> dict[str, float]:
    done = [r for r in recs if r.done]
    ttft = [r.ttft for r in done]
    tpot = [r.tpot for r in done if r.output_tokens > 1]
    e2e = [r.e2e for r in done]
    return {
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p99_s": percentile(ttft, 99),
        "tpot_p50_s": percentile(tpot, 50),
        "tpot_p99_s": percentile(tpot, 99),
        "e2e_p50_s": percentile(e2e, 50),
        "e2e_p99_s": percentile(e2e, 99),
    }


def summarize(
    records: Sequence[RequestRecord],
    *,
    span_s: float,
    block_size: int,
    with_oracle: bool = True,
) -> dict[str, Any]:
    """The per-load-point figures of one policy (see docs/SIMULATION.md)."""
    n = len(records)
    met = sum(1 for r in records if r.met_slo())
    per_class: dict[str, Any] = {}
    by_class: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_class.setdefault(r.slo.name, []).append(r)
    for name, recs in sorted(by_class.items()):
        per_class[name] = {
            "requests": len(recs),
            "completed": sum(1 for r in recs if r.done),
            "shed": sum(1 for r in recs if r.shed),
            "slo_attainment": sum(1 for r in recs if r.met_slo()) / len(recs),
            **_latency(recs),
        }
    prompt = sum(r.req.prompt_tokens for r in records if r.done)
    cached = sum(r.cached_tokens for r in records if r.done)
    host_cached = sum(r.host_cached_tokens for r in records if r.done)
    tenants: dict[str, int] = {}
    for r in records:
        if r.done:
            tenants[r.req.tenant] = (
                tenants.get(r.req.tenant, 0) + r.req.prompt_tokens + r.output_tokens
            )
    has_prefix = any(r.req.block_hashes for r in records)
    out: dict[str, Any] = {
        "requests": n,
        "rate_rps": n / span_s if span_s > 0 else 0.0,
        "completed": sum(1 for r in records if r.done),
        "shed": sum(1 for r in records if r.shed),
        "slo_attainment": met / n if n else 0.0,
        **_latency(records),
        "per_class": per_class,
        "prefix_hit_rate": cached / prompt if prompt else 0.0,
        "host_prefix_hit_rate": host_cached / prompt if prompt else 0.0,
        "oracle_prefix_hit_rate": (
            oracle_prefix_hit_rate(records, block_size) if with_oracle and has_prefix else None
        ),
        "preemptions": sum(r.preemptions for r in records),
        "tokens_per_tenant": dict(sorted(tenants.items())),
        "jain_index": jain_index(tenants.values()),
    }
    return out


def failed_slos(point: Mapping[str, Any]) -> list[str]:
    """The configured SLOs' SLIs a point missed (``slo/sli``), if it judged any."""
    slos = point.get("slos") or {}
    return [f"{name}/{sli}" for name, per in slos.items() for sli, v in per.items()
            if not v.get("met", True)]


def passes(point: Mapping[str, Any], threshold: float = 0.9) -> bool:
    """A load passed: its SLO attainment is at least ``threshold`` and every configured
    SLO (``--config``'s ``slos:``) was met. A goodput is only ever a passing load's."""
    return float(point["slo_attainment"]) >= threshold and not failed_slos(point)


def goodput(points: Sequence[Mapping[str, Any]], threshold: float = 0.9) -> float:
    """Highest swept request rate that passed (``passes``; 0.0 when none did)."""
    ok = [float(p["rate_rps"]) for p in points if passes(p, threshold)]
    return max(ok) if ok else 0.0
