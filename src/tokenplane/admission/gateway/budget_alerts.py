"""Budget alerts: a scope crossed 50 / 80 / 100 % of a budget.

Each alert increments a Prometheus counter (and sets the highest threshold gauge);
when a webhook URL is configured it is also POSTed there as JSON, fire-and-forget
on a background task (never on the request's path). Failed posts are logged and
counted, never retried.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

import aiohttp

from tokenplane.admission.outcomes import Alert
from tokenplane.observe.metrics import GatewayMetrics

log = logging.getLogger("tokenplane.admission.alerts")


def alert_payload(tenant: str, alert: Alert, now: float) -> dict[str, Any]:
    return {
        "type": "budget_threshold",
        "tenant": tenant,
        "scope": {"kind": alert.scope.kind, "id": alert.scope.id, "model": alert.scope.model},
        "limit_name": alert.limit_name,
        "threshold_pct": alert.threshold_pct,
        "used": alert.used,
        "limit": alert.limit,
        "ts": now,
    }


class BudgetAlerts:
    """Turns admission alerts into metrics and (optionally) webhook posts."""

    def __init__(self, metrics: GatewayMetrics, webhook_url: str | None = None,
                 timeout_s: float = 5.0) -> None:
        self.metrics = metrics
        self.webhook_url = webhook_url
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.failed = 0

    def emit(self, tenant: str, alerts: Sequence[Alert]) -> None:
        if not alerts:
            return
        now = time.time()
        m = self.metrics
        for a in alerts:
            labels = (tenant, a.scope.kind, a.limit_name)
            m.budget_alerts.labels(*labels, str(a.threshold_pct)).inc()
            m.budget_used_pct.labels(*labels).set(a.threshold_pct)
            log.warning("budget %s of %s crossed %d%% (%d of %d)", a.limit_name, a.scope.label,
                        a.threshold_pct, a.used, a.limit)
            if self.webhook_url is not None:
                task = asyncio.get_running_loop().create_task(
                    self._post(alert_payload(tenant, a, now)))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _post(self, payload: dict[str, Any]) -> None:
        assert self.webhook_url is not None
        try:
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=self.timeout_s))
            async with self._session.post(self.webhook_url, json=payload) as resp:
                if resp.status >= 400:
                    raise aiohttp.ClientError(f"HTTP {resp.status}")
            self.sent += 1
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.failed += 1
            self.metrics.budget_webhook_failures.inc()
            log.error("budget alert webhook %s failed: %s", self.webhook_url, exc)

    async def drain(self) -> None:
        """Wait for the posts in flight (used at shutdown and by tests)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        await self.drain()
        if self._session is not None:
            await self._session.close()
            self._session = None
