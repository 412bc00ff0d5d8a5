"""Posts SLO alert transitions to the configured webhooks, off the request path.

Each (transition, webhook) is its own task: a post that fails (connection error,
time-out, 408, 429 or a 5xx) is retried with exponential backoff, from
``retry_initial`` to at most ``retry_max`` apart, ``max_attempts`` in all; any other
answer ends it. Closing waits briefly for posts in flight, then cancels them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

import aiohttp

from tokenplane.config.slo_schema import SloAlertingConfig, SloWebhookConfig
from tokenplane.slo.alerts import Transition
from tokenplane.slo.canary_guards import GuardDecision
from tokenplane.slo.notifications import (
    alertmanager_body,
    rollback_alertmanager_body,
    rollback_text_body,
    text_body,
)

log = logging.getLogger("tokenplane.slo")

RETRYABLE = frozenset({408, 429})


class WebhookNotifier:
    def __init__(self, cfg: SloAlertingConfig) -> None:
        self.cfg = cfg
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.failed = 0
        self.retries = 0

    def notify(self, t: Transition) -> None:
        for hook in self.cfg.webhooks:
            if t.firing.key.severity in hook.severities:
                body = alertmanager_body(t) if hook.format == "alertmanager" else text_body(t)
                self._send(hook, body)

    def notify_rollback(self, d: GuardDecision) -> None:
        """A canary rolled back: a page, to every webhook that takes pages."""
        for hook in self.cfg.webhooks:
            if "page" in hook.severities:
                body = (rollback_alertmanager_body(d) if hook.format == "alertmanager"
                        else rollback_text_body(d))
                self._send(hook, body)

    def _send(self, hook: SloWebhookConfig, body: dict[str, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._deliver(hook, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, hook: SloWebhookConfig, body: dict[str, Any]) -> int:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.cfg.timeout))
        headers = {name: value for name, env in hook.headers_env.items()
                   if (value := os.environ.get(env))}  # an unset variable sends no header
        async with self._session.post(hook.url, json=body, headers=headers) as resp:
            await resp.read()
            return resp.status

    async def _deliver(self, hook: SloWebhookConfig, body: dict[str, Any]) -> None:
        delay = self.cfg.retry_initial
        for attempt in range(1, self.cfg.max_attempts + 1):
            try:
                status = await self._post(hook, body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, why = 0, str(exc) or type(exc).__name__
            else:
                why = f"HTTP {status}"
                if status < 300:
                    self.sent += 1
                    return
                if status < 500 and status not in RETRYABLE:
                    break
            if attempt == self.cfg.max_attempts:
                break
            self.retries += 1
            log.info("SLO alert post to %s failed (%s); retry %d in %.1fs", hook.url, why,
                     attempt, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.cfg.retry_max)
        self.failed += 1
        log.warning("SLO alert post to %s given up after %d attempt(s) (%s)", hook.url,
                    attempt, why)

    async def close(self, grace_s: float = 2.0) -> None:
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._session is not None:
            await self._session.close()
            self._session = None
