"""One generation in flight: the engine's token counts turned into OpenAI output.

The service's driver puts, per request, the number of tokens each engine step
emitted (an int), then the ``FinishedRequest``, or ``None`` when the service shuts
down. ``Generation`` holds the pre-drawn output ids; ``SSEStream`` turns the queue
into complete SSE events and aborts the engine request if it is closed early.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from tokenplane.engine.core import FinishedRequest
from tokenplane.engine.openai_format import DONE, Formatter, usage
from tokenplane.errors import GatewayError

QueueItem = int | FinishedRequest | None


class SimulatedDrop(ConnectionResetError):
    """The HTTP layer must drop the connection now (x-sim-fail-after, shutdown).

    A ConnectionResetError, so an in-process caller sees what a dropped socket gives.
    """


class Generation:
    """A request's output plan and the queue the engine driver feeds."""

    def __init__(
        self,
        rid: str,
        prompt_tokens: int,
        words: list[str],
        finish_reason: str,
        reasoning_tokens: int | None,
        formatter: Formatter,
        abort: Callable[[str], None],
    ) -> None:
        self.rid = rid
        self.prompt_tokens = prompt_tokens
        self.words = words
        self.finish_reason = finish_reason
        self.reasoning_tokens = reasoning_tokens
        self.fmt = formatter
        self.queue: asyncio.Queue[QueueItem] = asyncio.Queue()
        self.done = False
        self._abort = abort

    def abort(self) -> None:
        if not self.done:
            self.done = True
            self._abort(self.rid)

    def usage(self, fin: FinishedRequest) -> dict[str, Any]:
        return usage(self.prompt_tokens, fin.output_tokens, fin.cached_tokens,
                     self.reasoning_tokens)

    async def wait(self) -> FinishedRequest:
        """Wait for the whole output (non-streaming); aborts if cancelled."""
        try:
            while True:
                item = await self.queue.get()
                if isinstance(item, FinishedRequest):
                    self.done = True
                    return item
                if item is None:
                    self.done = True
                    raise GatewayError(503, "the engine is shutting down", code="shutting_down")
        finally:
            self.abort()

    def body(self, fin: FinishedRequest) -> bytes:
        r = self.reasoning_tokens or 0
        reasoning = "".join(self.words[:r]) if self.reasoning_tokens is not None else None
        content = "".join(self.words[r:fin.output_tokens])
        return self.fmt.body(content, reasoning, self.finish_reason, self.usage(fin))


class SSEStream:
    """AsyncIterator[bytes] of SSE events; aclose() before the end aborts the request."""

    def __init__(self, gen: Generation, fail_after: int | None) -> None:
        self._gen = gen
        self._fail_after = fail_after
        self._buf: deque[bytes] = deque()
        self._sent = 0
        self._closed = False

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> bytes:
        while not self._buf:
            if self._closed:
                raise StopAsyncIteration
            if self._fail_after is not None and self._sent >= self._fail_after:
                self._closed = True
                self._gen.abort()
                raise SimulatedDrop(f"x-sim-fail-after: dropped after {self._sent} tokens")
            await self._advance()
        return self._buf.popleft()

    async def _advance(self) -> None:
        gen = self._gen
        item = await gen.queue.get()
        if item is None:
            self._closed = True
            gen.done = True
            raise SimulatedDrop("the engine is shutting down")
        if isinstance(item, FinishedRequest):
            gen.done = True
            if gen.fmt.include_usage:
                self._buf.append(gen.fmt.usage_chunk(gen.usage(item)))
            self._buf.append(DONE)
            self._closed = True
            return
        reasoning = gen.reasoning_tokens or 0
        total = len(gen.words)
        for _ in range(item):
            i = self._sent
            if i >= total:
                break
            if i == 0:
                role = gen.fmt.role_chunk()
                if role is not None:
                    self._buf.append(role)
            finish = gen.finish_reason if i == total - 1 else None
            self._buf.append(gen.fmt.token_chunk(gen.words[i], i < reasoning, finish))
            self._sent = i + 1

    async def aclose(self) -> None:
        """Stop early: the engine stops generating for nobody."""
        self._closed = True
        self._buf.clear()
        self._gen.abort()
