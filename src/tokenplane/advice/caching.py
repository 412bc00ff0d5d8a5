"""Cacheable prefixes: system prompts that repeat, and what a prefix cache would save.

A template's first request of a day writes its system prompt to a cache; every later
request of that day could read it. Repeated tokens = the system tokens of all requests
but the first per (day, template) (``Aggregate.prefix_repeat_tokens``; the first ones
are ``prefix_write_tokens``; the ledger query takes each day's rollup row, so a
template served by two model versions counts two writes a day). What the ledger
already shows read from a cache (``cached_input_tokens``) is subtracted. The money
saved is the repeats at the input price less the cached-input price, net of the
cache-write premium (the write price less the input price) paid on each day's first
request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal

from tokenplane.advice.model import Aggregate, Finding, Rates, Thresholds, Window, micros
from tokenplane.advice.rows import alias_key, evidence_query, group


def cacheable_prefixes(rows: Iterable[Aggregate], rates: Callable[[str], Rates],
                       window: Window, th: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for total in group(rows, alias_key).values():
        rep, writes = total.prefix_repeat_tokens, total.prefix_write_tokens
        if total.requests < th.min_requests or total.input_tokens <= 0 or rep <= 0:
            continue
        share = rep / total.input_tokens
        uncached = max(0.0, rep - total.cached_input_tokens)
        tokens = int(window.per_month(uncached))
        if share < th.cacheable_share or tokens < th.min_tokens_per_month:
            continue
        r = rates(total.model)
        read_gain = micros(window.per_month(uncached), r.input - r.cached_input)
        premium = micros(window.per_month(writes),
                         max(r.cache_write - r.input, Decimal(0)))
        money = max(0, read_gain - premium)
        discounted = r.cached_input < r.input
        action = (
            "Send the shared system prompt first and unchanged (no timestamps or user data "
            "before it) and turn on the provider's prompt caching: on Anthropic's Messages "
            "API, a cache_control breakpoint on the last system block (and the tools) "
            "('ttl': '1h' when the prompt recurs less often than every 5 minutes); OpenAI "
            "caches prompts of 1,024 tokens or more by itself. The saving is net of the "
            "cache-write premium." if discounted else
            "Keep the shared system prompt first and unchanged and enable the engine's "
            "prefix caching (and prefix-aware routing, routing.profile) so repeats skip "
            "prefill; no price discount is configured (prices.cached_input), so the saving "
            "is prefill work, not money.")
        out.append(Finding(
            kind="cacheable_prefixes", tenant=total.tenant, app=total.app, model=total.model,
            title=(f"{share:.0%} of the prompt tokens of app '{total.app}' on "
                   f"'{total.model}' repeat as a system-prompt prefix"),
            evidence={
                "query": evidence_query("advice_rollups", total, "template, bucket"),
                "figures": {
                    "prompt_tokens": total.input_tokens, "repeated_prefix_tokens": int(rep),
                    "cacheable_share": round(share, 4),
                    "already_cached_tokens": total.cached_input_tokens,
                    "cache_write_tokens": writes,
                    "cached_input_price": str(r.cached_input), "input_price": str(r.input),
                    "cache_write_price": str(r.cache_write),
                }},
            tokens_per_month=tokens, cost_micros_per_month=money, currency=total.currency,
            action=action,
        ))
    return out
