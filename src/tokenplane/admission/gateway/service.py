"""What admission needs at request time, built once per worker.

The limit table (from ``meta.db``, reloaded when another process changes it), the
counter store (in-process, or Redis shared by every replica), the output-length
predictor, and prices (the meter's price book) to turn tokens into money.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from tokenplane.admission.gateway.budget_alerts import BudgetAlerts
from tokenplane.admission.limit_source import LimitSource
from tokenplane.admission.limiter import Admission
from tokenplane.admission.refusals import BytePace, RefusalMemo
from tokenplane.admission.scopes import Scope, admission_parties
from tokenplane.admission.stores.base import CounterStore
from tokenplane.admission.stores.factory import make_store
from tokenplane.admission.stores.resilient import ResilientStore
from tokenplane.auth.principal import Principal
from tokenplane.config.schema import AdmissionConfig
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import ModelPrice, PriceBook
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.periodic import Periodic
from tokenplane.tokens.predictor import LengthKey, LengthPredictor

log = logging.getLogger("tokenplane.admission")


class AdmissionService:
    """Admission for one gateway worker; the stage and finishers call it."""

    def __init__(self, cfg: AdmissionConfig, limits: LimitSource, store: CounterStore,
                 metrics: GatewayMetrics, prices: Callable[[], PriceBook | None],
                 alerts: BudgetAlerts, predictor: LengthPredictor | None = None) -> None:
        self.cfg = cfg
        self.limits = limits
        self.store = store
        self.metrics = metrics
        self.alerts = alerts
        self.admission = Admission(limits.table, store, ttl_s=cfg.reservation_ttl_s)
        # shared with the meter finisher, which teaches it every finished request
        self.predictor = predictor or LengthPredictor(default=cfg.default_output_tokens)
        self._prices = prices
        self._price_cache: dict[str, ModelPrice | None] = {}
        self._price_version = ""
        self._chains: dict[tuple[str | None, ...], list[Scope]] = {}
        # callers past a request rate, refused at once until it has room
        # (admission/refusals.py); bytes of bodies refused for their size, per key
        self.refusals = RefusalMemo()
        # per tenant: its requests between their clamp and their settlement (the
        # share ``clamp_max_tokens`` gives each, admission/planning.clamp_share)
        self._in_flight: dict[str, int] = {}
        self.oversize = BytePace(cfg.refused_bytes_per_s, cfg.refused_bytes_burst)
        self._heartbeat = Periodic("admission-heartbeat", cfg.heartbeat_s, self.beat, log=log,
                                   failure="admission heartbeat failed")
        if isinstance(store, ResilientStore):
            resilient = store
            metrics.track_admission_store(lambda: dataclasses.asdict(resilient.stats))

    @classmethod
    def build(cls, cfg: AdmissionConfig, redis_url: str | None, home: Path,
              metrics: GatewayMetrics, prices: Callable[[], PriceBook | None],
              predictor: LengthPredictor | None = None, *,
              limits: LimitSource, local_socket: str | None = None,
              workers: int = 1) -> AdmissionService:
        store = make_store(redis_url, failure_mode=cfg.failure_mode, replicas=cfg.replicas,
                           prefix=cfg.key_prefix, timeout_s=cfg.timeout_s,
                           probe_interval_s=cfg.probe_interval_s, lease_s=cfg.lease_s,
                           local_socket=local_socket, workers=workers, logger=log)
        return cls(cfg, limits, store, metrics, prices, BudgetAlerts(metrics, cfg.alert_webhook),
                   predictor)

    async def start(self) -> None:
        """The heartbeat: renews this worker's concurrency leases and retries the
        settlements the shared store could not take."""
        self._heartbeat.start()

    async def beat(self) -> None:
        await self.store.heartbeat(time.time())
        self.note_store_health()

    async def close(self) -> None:
        await self._heartbeat.close()
        await self.alerts.close()
        await self.store.close()
        self.limits.close()

    # --- per request --------------------------------------------------------------
    def refresh(self) -> None:
        """Pick up limits another process changed (a stat or two, at most every
        ``limits_reload_s``)."""
        self.limits.refresh()
        if self.admission.table is not self.limits.table:
            # the limits changed: a remembered refusal may no longer hold
            self.refusals.clear()
        self.admission.table = self.limits.table

    def note_store_health(self) -> None:
        if isinstance(self.store, ResilientStore):
            self.metrics.admission_store_degraded.set(1 if self.store.degraded else 0)

    def scopes(self, p: Principal, alias: str | None) -> list[Scope]:
        """The caller's scope chain (cached: callers repeat, scopes are immutable)."""
        key = (p.tenant, p.department, p.app, p.key_id, p.end_user, alias)
        chain = self._chains.get(key)
        if chain is None:
            if len(self._chains) >= 50_000:
                self._chains.clear()
            chain = admission_parties(p.tenant, p.department, p.app, p.key_id,
                                        p.end_user).scope_chain(alias)
            self._chains[key] = chain
        return chain

    def enter_flight(self, tenant: str) -> int:
        """Counts one more of the tenant's clamped requests in flight; the others."""
        others = self._in_flight.get(tenant, 0)
        self._in_flight[tenant] = others + 1
        return others

    def leave_flight(self, tenant: str) -> None:
        left = self._in_flight.get(tenant, 0) - 1
        if left > 0:
            self._in_flight[tenant] = left
        else:
            self._in_flight.pop(tenant, None)

    @staticmethod
    def length_key(p: Principal, alias: str) -> LengthKey:
        return LengthKey(p.tenant, p.app or "", alias)

    def predict(self, p: Principal, alias: str, prompt_tokens: int) -> int | None:
        if not self.cfg.predict_output:
            return None
        return self.predictor.predict(self.length_key(p, alias), prompt_tokens)

    # --- money --------------------------------------------------------------------
    def _price(self, alias: str) -> ModelPrice | None:
        book = self._prices()
        if book is None:
            return None
        if book.version != self._price_version:
            self._price_cache, self._price_version = {}, book.version
        if alias not in self._price_cache:
            probe = UsageEvent(request_id="", attempt=0, ts=0.0, model=alias)
            self._price_cache[alias] = book.model_price(probe)
        return self._price_cache[alias]

    def currency(self) -> str:
        """The prices' currency (what budgets are in)."""
        book = self._prices()
        return book.currency if book is not None else "USD"

    def cost(self, alias: str, input_tokens: int, output_tokens: int, *, cached: int = 0,
             reasoning: int = 0) -> int:
        """Cost in micros, priced exactly like the ledger prices the usage event."""
        price = self._price(alias)
        if price is None:
            return 0
        event = UsageEvent(request_id="", attempt=0, ts=0.0, model=alias,
                           input_tokens=input_tokens, cached_input_tokens=cached,
                           output_tokens=output_tokens, reasoning_tokens=reasoning)
        return price.for_prompt(input_tokens).cost_micros(event)

    def output_cost(self, alias: str, prompt_tokens: int, tokens: int) -> int:
        """Upper bound of the cost of ``tokens`` more output tokens (for stream debits)."""
        price = self._price(alias)
        if price is None:
            return 0
        p = price.for_prompt(prompt_tokens)
        per = max(p.output, p.reasoning if p.reasoning is not None else p.output)
        return math.ceil(per * Decimal(tokens))

    @staticmethod
    def now() -> float:
        return time.time()
