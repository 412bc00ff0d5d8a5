"""One helper for the gateway's periodic background work (the scheduler's timer, the
metrics scraper, the audit flush, the meter's orphan adoption)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable


class Periodic:
    """Runs ``step`` every ``interval_s`` seconds on the running loop until closed.

    ``first_now`` runs the first step at once (else after one interval). A step that
    raises is logged on ``log`` with ``failure`` and the next one runs as planned, so
    one bad round never ends the task. ``start`` is idempotent; ``close`` cancels the
    task and waits for it.
    """

    def __init__(self, name: str, interval_s: float, step: Callable[[], Awaitable[None]], *,
                 log: logging.Logger, failure: str, first_now: bool = False) -> None:
        self.name = name
        self.interval_s = interval_s
        self.step = step
        self.log = log
        self.failure = failure
        self.first_now = first_now
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        if not self.first_now:
            await asyncio.sleep(self.interval_s)
        while True:
            try:
                await self.step()
            except Exception:
                self.log.exception(self.failure)
            await asyncio.sleep(self.interval_s)
