"""Cancelling background tasks so that they really end."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], retry_s: float = 0.5) -> None:
    """Cancel each task, again every ``retry_s`` until it has ended: Python 3.11's
    ``asyncio.wait_for`` (which DNS and HTTP clients use inside) can swallow a
    cancellation that lands just as its inner wait completes, and a polling task
    would then go on."""
    for t in tasks:
        while not t.done():
            t.cancel()
            await asyncio.wait({t}, timeout=retry_s)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
