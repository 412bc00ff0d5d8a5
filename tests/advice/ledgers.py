"""Ledger fixtures for the advisor: each built to contain one finding kind (or none),
written through the real sink, priced with a real price book."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.feedback import FeedbackRecord, record_feedback
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores.base import LedgerSink

DAY = 86400
NOW = 1_780_000_000.0 // DAY * DAY + DAY / 2  # midday, 2026-05-28
BOOK = PriceBook({"currency": "USD", "models": {
    "big": {"input": "2.50", "cached_input": "1.25", "cache_write": "3.125", "output": "10"},
    "small": {"input": "0.15", "cached_input": "0.075", "cache_write": "0.1875",
              "output": "0.60"},
}})


class Ledger:
    """Collects events and feedback, then writes them through a sink."""

    def __init__(self, prefix: str = "req") -> None:
        self.prefix = prefix
        self.events: list[UsageEvent] = []
        self.feedback: list[FeedbackRecord] = []
        self._ids = itertools.count()

    def add(self, n: int, *, tenant: str = "acme", app: str = "chat", model: str = "big",
            days: int = 3, system: int = 200, user: int = 100, history: int = 0,
            output: int | Callable[[int], int] = 100, finish: str | Callable[[int], str] = "stop",
            cached: int | None = None, **attrs: Any) -> list[UsageEvent]:
        """``n`` answered requests spread over the ``days`` before NOW. ``cached``:
        prompt tokens read from a cache (default: the system prompt, caching on)."""
        made = []
        for i in range(n):
            k = next(self._ids)
            ts = NOW - DAY * days + (i + 0.5) * DAY * days / n
            out = output(i) if callable(output) else output
            prompt = system + user + history
            ev = UsageEvent(
                f"{self.prefix}-{k}", 0, ts, tenant=tenant, department="d", app=app, key_id="k",
                model=model, arrival_ts=ts - 1, upstream_start_ts=ts - 0.9,
                first_token_ts=ts - 0.5, last_token_ts=ts, input_system=system,
                input_history=history, input_user=user, input_tokens=prompt,
                cached_input_tokens=system if cached is None else cached,
                output_tokens=out, finish_reason=finish(i) if callable(finish) else finish,
                **attrs)
            BOOK.price(ev)
            made.append(ev)
        self.events += made
        return made

    def score(self, events: list[UsageEvent], score: float) -> None:
        for ev in events:
            self.feedback.append(FeedbackRecord(
                ev.tenant, ev.request_id, ev.app, ev.model, ev.model_version or "", "k",
                score, None, (), ev.ts, ev.ts + 1))

    async def write(self, sink: LedgerSink) -> None:
        await sink.record_price_table(BOOK.version, BOOK.currency, orjson.dumps(BOOK.table()))
        await sink.write(self.events)
        for rec in self.feedback:
            await record_feedback(sink, rec)


def clean() -> Ledger:
    """A healthy ledger: one template per app, caching on, short answers that end on
    their own, one version, one alias per app, little history, context mostly kept."""
    led = Ledger()
    for app in ("chat", "search", "qa"):
        led.add(40, app=app, system_fingerprint=f"fp-{app}", model_version="v1",
                output=lambda i: 100 + i % 7, history=40, context_offered_tokens=500,
                context_kept_tokens=450)
    led.add(30, tenant="globex", app="crm", model="small", system_fingerprint="fp-crm",
            model_version="v1")
    return led


def template_waste() -> Ledger:
    led = clean()
    led.add(30, app="support", system=200, system_fingerprint="fp-lean")
    led.add(30, app="support", system=700, system_fingerprint="fp-fat")
    return led


def cacheable_prefixes() -> Ledger:
    led = clean()
    led.add(40, app="agent", system=1000, user=200, cached=0, system_fingerprint="fp-agent")
    return led


def verbose_length() -> Ledger:
    led = clean()
    led.add(40, app="writer", output=lambda i: 512 if i % 4 == 0 else 300,
            finish=lambda i: "length" if i % 4 == 0 else "stop")
    return led


def verbose_peers() -> Ledger:
    led = clean()
    led.add(30, app="essay", output=1500)
    return led


def version_efficiency() -> Ledger:
    led = clean()
    led.add(30, app="summary", model_version="2026-05", output=120)
    led.add(30, app="summary", model_version="2026-06", output=174)
    return led


def right_sizing() -> Ledger:
    led = clean()
    big = led.add(30, app="triage", model="big", output=150)
    small = led.add(30, app="triage", model="small", output=150)
    led.score(big[:25], 0.8)
    led.score(small[:25], 0.79)
    return led


def context_dropped() -> Ledger:
    led = clean()
    led.add(30, app="rag", context_offered_tokens=4000, context_kept_tokens=1000,
            system_fingerprint="fp-rag")
    return led


def history_growth() -> Ledger:
    led = clean()
    led.add(15, app="companion", history=800, days=4)
    led.add(15, app="companion", history=2400, days=2)
    return led


def tool_output_bloat() -> Ledger:
    led = clean()
    led.add(30, app="agent", system=100, user=1200, history=700, tool_output_tokens=800,
            system_fingerprint="fp-agent")
    return led


FIXTURES: dict[str, Callable[[], Ledger]] = {
    "template_waste": template_waste,
    "cacheable_prefixes": cacheable_prefixes,
    "verbose_outputs": verbose_length,
    "version_efficiency": version_efficiency,
    "right_sizing": right_sizing,
    "context_dropped": context_dropped,
    "history_growth": history_growth,
    "tool_output_bloat": tool_output_bloat,
}
