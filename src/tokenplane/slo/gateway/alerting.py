"""Turns the evaluation into notifications: after each refresh, the leader compares
the alerts firing now with those it fired before and sends each transition (firing,
resolved); a process that does not lead sends nothing and forgets what it knew, so
when it takes the lead it re-sends what is firing then (at least once, never from
two leaders at a time)."""

from __future__ import annotations

import logging

from tokenplane.slo.alerts import AlertBook
from tokenplane.slo.canary_guards import GuardDecision
from tokenplane.slo.evaluator import SliStatus
from tokenplane.slo.gateway.leader import Leadership
from tokenplane.slo.gateway.notify import WebhookNotifier
from tokenplane.slo.notifications import summary

log = logging.getLogger("tokenplane.slo")


class SloAlerting:
    def __init__(self, leader: Leadership, notifier: WebhookNotifier) -> None:
        self.leader = leader
        self.notifier = notifier
        self.book = AlertBook()
        self.leading = False

    async def step(
        self, rows: list[SliStatus], now: float, rollbacks: list[GuardDecision] | None = None
    ) -> int:
        """One round; how many notifications were sent (transitions and rollbacks)."""
        leading = await self.leader.acquire()
        if leading != self.leading:
            log.info("SLO alerts: this process %s the lead",
                     "takes" if leading else "no longer has")
            self.leading = leading
        if not leading:
            self.book = AlertBook()
            return 0
        firing = [f for row in rows for f in row.firing]
        transitions = self.book.update(firing, now)
        for t in transitions:
            log.warning("SLO alert %s: %s", t.state, summary(t))
            self.notifier.notify(t)
        for d in rollbacks or ():
            self.notifier.notify_rollback(d)
        return len(transitions) + len(rollbacks or ())

    async def close(self) -> None:
        await self.notifier.close()
        await self.leader.release()
