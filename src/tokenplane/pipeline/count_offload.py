"""Counting large prompts off the event loop, fairly across tenants.

Tokenizing a prompt of megabytes takes the better part of a second; on the event
loop it would hold every other request for that long. A request whose body is at
least ``OFFLOAD_BYTES`` is counted on a worker thread instead (tiktoken, and the
Hugging Face tokenizers' batch call, let the loop run meanwhile), at most ``slots``
at once and at most ``per_tenant`` for one tenant: a tenant's further big prompts
wait their turn, and the tenants waiting are served in rotation, so one tenant's
stream of big prompts delays another tenant's big prompt by at most one count and
never a small request, which is counted on the loop as before.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

OFFLOAD_BYTES = 32 * 1024  # a request body at least this large is counted off the loop


class CountOffload:
    def __init__(self, slots: int = 2, per_tenant: int = 1) -> None:
        if slots < 1 or per_tenant < 1:
            raise ValueError("slots and per_tenant must be positive")
        self.slots = slots
        self.per_tenant = per_tenant
        self._free = slots
        self._running: dict[str, int] = {}
        # tenants with counts waiting, in the order they are served (a tenant served
        # while it has more waiting goes to the back)
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    async def run(self, tenant: str, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread (the loop's default executor), in turn."""
        await self._enter(tenant)
        try:
            return await asyncio.get_running_loop().run_in_executor(None, fn)
        finally:
            self._leave(tenant)

    def running(self, tenant: str) -> int:
        return self._running.get(tenant, 0)

    def waiting(self, tenant: str) -> int:
        q = self._waiting.get(tenant)
        return len(q) if q else 0

    async def _enter(self, tenant: str) -> None:
        # a free slot means every waiting count is held back by its tenant's share,
        # so this one can take it if its tenant's share allows
        if self._free > 0 and self._running.get(tenant, 0) < self.per_tenant:
            self._take(tenant)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._leave(tenant)  # its turn had come: give it on
            else:
                q = self._waiting.get(tenant)
                if q is not None and turn in q:
                    q.remove(turn)
                    if not q:
                        del self._waiting[tenant]
            raise

    def _take(self, tenant: str) -> None:
        self._free -= 1
        self._running[tenant] = self._running.get(tenant, 0) + 1

    def _leave(self, tenant: str) -> None:
        self._free += 1
        left = self._running[tenant] - 1
        if left:
            self._running[tenant] = left
        else:
            del self._running[tenant]
        self._dispatch()

    def _dispatch(self) -> None:
        """Gives free slots to waiting tenants in rotation."""
        while self._free > 0:
            tenant = next((t for t in self._waiting
                           if self._running.get(t, 0) < self.per_tenant), None)
            if tenant is None:
                return
            q = self._waiting[tenant]
            turn = q.popleft()
            del self._waiting[tenant]
            if q:
                self._waiting[tenant] = q  # to the back of the rotation
            if turn.done():  # cancelled while waiting
                continue
            self._take(tenant)
            turn.set_result(None)
