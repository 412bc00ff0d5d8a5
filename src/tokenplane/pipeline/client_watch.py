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
