"""Noticing a client that leaves while the gateway waits on the upstream.

While the upstream call runs (a non-stream answer, or a stream's head), nothing is
written to the client, so a client that closes its connection would not be noticed
before the answer came back (a whole generation later, or a timeout for a hung
upstream). :func:`watched` awaits the call with a callback on the client's
connection: when the client goes, the waiting task is cancelled the way
``asyncio.timeout`` does it (cancel, then ``uncancel`` where it is caught), the
transport drops the upstream connection on its way out (vLLM, SGLang and the
simulated engine abort the request), and :class:`ClientGone` is raised in its
place, so the finishers run as for any failed request (status ``cancelled``, 499).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from tokenplane.errors import GatewayError
from tokenplane.pipeline.context import ClientLink

T = TypeVar("T")


class ClientGone(GatewayError):
    """The client closed its connection before its answer (ledger: cancelled, 499)."""

    def __init__(self) -> None:
        super().__init__(499, "The client closed the connection.", code="client_disconnected")


async def watched(link: ClientLink | None, aw: Awaitable[T]) -> T:
    """Awaits ``aw``; raises :class:`ClientGone` (``aw`` cancelled) if the client
    leaves first. Call it only after checking that the client is not already gone."""
    if link is None:
        return await aw
    task = asyncio.current_task()
    assert task is not None
    base = task.cancelling()
    left = False

    def leave() -> None:
        nonlocal left
        left = True
        task.cancel()

    link.on_gone(leave)
    try:
        result = await aw
    except asyncio.CancelledError:
        if left and task.uncancel() <= base:
            raise ClientGone() from None
        raise
    finally:
        link.on_gone(None)
    if left:  # the call swallowed the cancellation: take the request back
        task.uncancel()
    return result


class StreamWatch:
    """A stream's watch on its client: :meth:`__call__` (the connection's ``on_gone``)
    cancels the relaying task only while it waits on the upstream (``armed``), so a
    client that leaves during a silence (a queued engine, a long think, a hung
    upstream) is noticed at once; writing and the budget's checks are never cut."""

    __slots__ = ("armed", "base", "fired", "left", "task")

    def __init__(self, link: ClientLink) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.task = task
        self.base = task.cancelling()
        self.armed = False
        self.fired = False
        self.left = False
        link.on_gone(self)

    def __call__(self) -> None:
        self.left = True
        if self.armed and not self.fired:
            self.fired = True
            self.task.cancel()

    def took_back(self) -> bool:
        """In ``except CancelledError``: True when the cancellation was this watch's
        (the client left); it is then taken back."""
        return self.fired and self.task.uncancel() <= self.base
