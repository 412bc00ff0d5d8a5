"""One generation in flight: the engine's token counts turned into OpenAI output.

A request runs as one engine request per choice (``n``; a completions batch: ``n`` per
prompt, choice ``prompt_index * n + i``). The service's driver puts,
per engine request, ``(choice index, tokens emitted by a step)``, then ``(choice
index, FinishedRequest)``, or ``None`` when the service shuts down. ``Generation``
holds the choices' plans (``engine/planning.py``); ``SSEStream`` turns the queue into
complete SSE events and aborts the engine requests if it is closed early.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from tokenplane.engine.core import FinishedRequest
from tokenplane.engine.openai_format import DONE, Formatter, usage
from tokenplane.engine.planning import ChoicePlan
from tokenplane.errors import GatewayError

QueueItem = tuple[int, int | FinishedRequest] | None


class SimulatedDrop(ConnectionResetError):
    """The HTTP layer must drop the connection now (x-sim-fail-after, shutdown).

    A ConnectionResetError, so an in-process caller sees what a dropped socket gives.
    """


class Generation:
    """A request's choices and the queue the engine driver feeds."""

    def __init__(
        self,
        rid: str,
        prompt_tokens: int,
        plans: list[ChoicePlan],
        formatter: Formatter,
        abort: Callable[[str], None],
        firsts: Sequence[int] = (0,),
    ) -> None:
        self.rid = rid
        self.prompt_tokens = prompt_tokens  # a batch's prompts summed
        self.firsts = firsts  # the first choice of each prompt (a batch: several)
        self.plans = plans
        self.fmt = formatter
        n = len(plans)
        # engine request ids, one per choice (the first is the request's own id)
        self.sub_ids = [rid] + [f"{rid}-{i}" for i in range(1, n)]
        self.fins: list[FinishedRequest | None] = [None] * n
        self.pending = n
        self.queue: asyncio.Queue[QueueItem] = asyncio.Queue()
        self.done = False
        self._abort = abort

    def abort(self) -> None:
        if not self.done:
            self.done = True
            for sid, fin in zip(self.sub_ids, self.fins, strict=True):
                if fin is None:
                    self._abort(sid)

    def finish(self, index: int, fin: FinishedRequest) -> bool:
        """Records choice ``index`` as finished; True once every choice is."""
        if self.fins[index] is None:
            self.fins[index] = fin
            self.pending -= 1
        if self.pending == 0:
            self.done = True
            return True
        return False

    def usage(self) -> dict[str, Any]:
        """Each prompt once, the completions summed, each prompt's first choice's cached
        tokens (vLLM's usage of a batch)."""
        fins = self.fins
        cached = 0
        for i in self.firsts:
            fin = fins[i]
            if fin is not None:
                cached += fin.cached_tokens
        completion = sum(f.output_tokens for f in fins if f is not None)
        reasoning: int | None = None
        if self.plans[0].reasons:
            reasoning = sum(min(p.reasoning, f.output_tokens)
                            for p, f in zip(self.plans, fins, strict=True) if f is not None)
        return usage(self.prompt_tokens, completion, cached, reasoning)

    async def wait(self) -> None:
        """Wait for every choice (non-streaming); aborts if cancelled."""
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    self.done = True
                    raise GatewayError(503, "the engine is shutting down", code="shutting_down")
                index, value = item
                if isinstance(value, FinishedRequest) and self.finish(index, value):
                    return
        finally:
            self.abort()

    def body(self) -> bytes:
        fmt = self.fmt
        choices = [fmt.choice(i, plan, fin.output_tokens if fin is not None else 0)
                   for i, (plan, fin) in enumerate(zip(self.plans, self.fins, strict=True))]
        return fmt.body(choices, self.usage())


class SSEStream:
    """AsyncIterator[bytes] of SSE events; aclose() before the end aborts the request."""

    def __init__(self, gen: Generation, fail_after: int | None) -> None:
        self._gen = gen
        self._fail_after = fail_after
        self._buf: deque[bytes] = deque()
        self._sent = [0] * len(gen.plans)  # tokens relayed, per choice
        self._chars = [0] * len(gen.plans)  # characters of text relayed, per choice
        self._total = 0
        self._closed = False

    def __aiter__(self) -> SSEStream:
        return self

    async def __anext__(self) -> bytes:
        while not self._buf:
            if self._closed:
                raise StopAsyncIteration
            if self._fail_after is not None and self._total >= self._fail_after:
                self._closed = True
                self._gen.abort()
                raise SimulatedDrop(f"x-sim-fail-after: dropped after {self._total} tokens")
            await self._advance()
        return self._buf.popleft()

    async def _advance(self) -> None:
        gen = self._gen
        item = await gen.queue.get()
        if item is None:
            self._closed = True
            gen.done = True
            raise SimulatedDrop("the engine is shutting down")
        index, value = item
        if isinstance(value, FinishedRequest):
            if gen.finish(index, value):
                if gen.fmt.include_usage:
                    self._buf.append(gen.fmt.usage_chunk(gen.usage()))
                self._buf.append(DONE)
                self._closed = True
            return
        plan = gen.plans[index]
        if plan.calls is None and plan.logprobs is None:
            self._text(index, plan, value)
        else:
            self._rich(index, plan, value)

    def _text(self, index: int, plan: ChoicePlan, count: int) -> None:
        """Reasoning and content tokens only (the common case)."""
        fmt = self._gen.fmt
        buf = self._buf
        pieces = plan.pieces
        total = len(pieces)
        reasoning = plan.reasoning
        i = self._sent[index]
        end = min(i + count, total)
        for t in range(i, end):
            if t == 0:
                role = fmt.role_chunk(index)
                if role is not None:
                    buf.append(role)
            last = t == total - 1
            piece = pieces[t]
            if piece or last:
                buf.append(fmt.token_chunk(index, piece, t < reasoning,
                                           plan.finish if last else None))
        self._total += end - i
        self._sent[index] = end

    def _rich(self, index: int, plan: ChoicePlan, count: int) -> None:
        """Tokens that carry logprobs or tool calls."""
        fmt = self._gen.fmt
        buf = self._buf
        pieces = plan.pieces
        total = len(pieces)
        lps = plan.logprobs
        i = self._sent[index]
        end = min(i + count, total)
        for t in range(i, end):
            if t == 0:
                role = fmt.role_chunk(index)
                if role is not None:
                    buf.append(role)
            last = t == total - 1
            finish = plan.finish if last else None
            piece = pieces[t]
            if t < plan.content_end:
                if piece or last:
                    lp = lps[t] if lps is not None else None
                    buf.append(fmt.token_chunk(index, piece, t < plan.reasoning, finish, lp,
                                               self._chars[index]))
                    self._chars[index] += len(piece)
                continue
            for j, call in enumerate(plan.calls or ()):
                if call.start <= t < call.end:
                    if t == call.start:
                        buf.append(fmt.call_chunk(index, {
                            "index": j, "id": call.id, "type": "function",
                            "function": {"name": call.name, "arguments": piece}}, None))
                    elif piece:
                        buf.append(fmt.call_chunk(
                            index, {"index": j, "function": {"arguments": piece}}, None))
                    break
            if last:
                buf.append(fmt.finish_chunk(index, plan.finish))
        self._total += end - i
        self._sent[index] = end

    async def aclose(self) -> None:
        """Stop early: the engine stops generating for nobody."""
        self._closed = True
        self._buf.clear()
        self._gen.abort()
