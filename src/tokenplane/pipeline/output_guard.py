"""The output guard: placeholders restored, the response PII policy applied and tool
calls checked, in non-stream answers and in streams.

:class:`GuardedCall` wraps the upstream call. When a request has nothing to restore,
no response policy that rewrites and no tool allow-list, the answer passes untouched
(streams stay on the relay's no-parse fast path). Otherwise stream events are parsed
and their ``content`` / ``text`` / tool-call ``arguments`` rewritten: one event out
for each event in, so per-event accounting is unchanged; text that may still become
a placeholder (or an entity the response policy masks) is held back and sent in a
later event, at the latest with the choice's ``finish_reason``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from tokenplane.errors import GatewayError, envelope
from tokenplane.governance.guard_state import GuardState
from tokenplane.governance.pii_policy import PiiBlocked, PiiPolicy, apply
from tokenplane.governance.pii_stream import PiiStreamMasker
from tokenplane.governance.tools import ToolNotAllowed, tool_name
from tokenplane.governance.vault import StreamRestorer
from tokenplane.operations.base import Operation
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.upstream_call import Call, absorb_json
from tokenplane.upstream.sse import frame, payload
from tokenplane.upstream.types import UpstreamResponse


class GuardedCall:
    """Wraps the upstream call: the output guard applied to what comes back."""

    def __init__(self, inner: Call) -> None:
        self.inner = inner

    async def send(self, ctx: RequestContext, on_attempt_failed: Any) -> UpstreamResponse:
        resp = await self.inner.send(ctx, on_attempt_failed)
        state = ctx.guard
        if state is None:
            return resp
        active = state.output_active(ctx.operation)
        if resp.events is None:
            if active and resp.body and resp.status < 400:
                try:
                    resp.body = guard_body(ctx.operation, state, resp.body)
                except GatewayError:
                    absorb_json(ctx, resp.body)  # the tokens were spent: bill them
                    if ctx.endpoint is not None:
                        ctx.endpoint.in_flight -= 1
                        ctx.endpoint.served += 1
                    raise
            state.response_body = resp.body
        elif active:
            resp.events = guard_events(ctx, state, resp, resp.events)
        return resp


def _response_policy(state: GuardState) -> PiiPolicy | None:
    return state.policy.response if state.policy.response_rewrites else None


def guard_body(operation: Operation, state: GuardState, body: bytes) -> bytes:
    """A non-stream answer with the output guard applied (raises to refuse it)."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(choices, list):
        return body
    policy = _response_policy(state)
    tools = state.policy.tools
    chat = operation.chat_choices
    for ch in choices:
        if not isinstance(ch, dict):
            continue
        if not chat:
            if isinstance(ch.get("text"), str):
                ch["text"] = _out_text(ch["text"], policy, state)
            continue
        msg = ch.get("message")
        if not isinstance(msg, dict):
            continue
        if tools.allowed is not None:
            denied = tools.denied_calls(msg.get("tool_calls"))
            if denied:
                state.verdicts["tools"] = {**state.verdicts.get("tools", {}), "denied": denied}
                raise ToolNotAllowed(denied, in_response=True)
        if isinstance(msg.get("content"), str):
            msg["content"] = _out_text(msg["content"], policy, state)
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                fn["arguments"] = state.vault.restore_json(fn["arguments"])
    return orjson.dumps(obj)


def _out_text(text: str, policy: PiiPolicy | None, state: GuardState) -> str:
    if policy is not None:
        try:
            text, found = apply(text, policy, state.vault)
        except PiiBlocked as exc:
            state.note_blocked("response", exc.entity_types)
            raise
        state.note_pii("response", found)
    return state.vault.restore(text)


class _Text:
    """One choice's text: the response policy first (what the model wrote), then
    placeholders restored (values the client itself sent)."""

    def __init__(self, policy: PiiPolicy | None, state: GuardState) -> None:
        self.guard = PiiStreamMasker(policy, state.vault) if policy is not None else None
        self.restorer = StreamRestorer(state.vault)

    def feed(self, text: str) -> str:
        if self.guard is not None:
            text = self.guard.feed(text)
        return self.restorer.feed(text) if text else ""

    def flush(self) -> str:
        text = self.guard.flush() if self.guard is not None else ""
        return self.restorer.feed(text) + self.restorer.flush()


class StreamRewrite:
    """Rewrites the events of one stream (see the module docstring)."""

    def __init__(self, ctx: RequestContext, state: GuardState) -> None:
        self.ctx = ctx
        self.state = state
        self.operation = op = ctx.operation
        self.chat = op.chat_choices
        self.policy = _response_policy(state)
        self.texts: dict[int, _Text] = {}
        self.args: dict[tuple[int, int], StreamRestorer] = {}
        self.finished: set[int] = set()

    def _text(self, index: int) -> _Text:
        t = self.texts.get(index)
        if t is None:
            t = self.texts[index] = _Text(self.policy, self.state)
        return t

    def event(self, ev: bytes) -> bytes:
        data = payload(ev + b"\n")
        if data is None:
            return ev
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return ev
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(choices, list) or not choices:
            return ev
        for ch in choices:
            if isinstance(ch, dict):
                self._choice(ch)
        return b"data: " + orjson.dumps(obj)

    def _choice(self, ch: dict[str, Any]) -> None:
        index = ch.get("index", 0) if isinstance(ch.get("index"), int) else 0
        done = ch.get("finish_reason") is not None
        if not self.chat:
            text = self._text(index).feed(ch["text"]) if isinstance(ch.get("text"), str) else ""
            if done:
                text += self._flush(index)
            ch["text"] = text
            return
        delta = ch.get("delta")
        if not isinstance(delta, dict):
            delta = ch["delta"] = {}
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and calls:
            self._calls(index, calls)
        if isinstance(delta.get("content"), str):
            delta["content"] = self._text(index).feed(delta["content"])
        if done:
            rest = self._flush(index)
            if rest:
                delta["content"] = (delta.get("content") or "") + rest
            tails = self._flush_args(index)
            if tails:
                delta["tool_calls"] = [*(delta.get("tool_calls") or []), *tails]

    def _calls(self, index: int, calls: list[Any]) -> None:
        tools = self.state.policy.tools
        named = [c for c in calls if isinstance(c, dict) and tool_name(c)]
        denied = tools.denied_calls(named)
        if denied:
            self.state.verdicts["tools"] = {**self.state.verdicts.get("tools", {}),
                                            "denied": denied}
            raise ToolNotAllowed(denied, in_response=True)
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                key = (index, c.get("index", 0) if isinstance(c.get("index"), int) else 0)
                r = self.args.get(key)
                if r is None:
                    r = self.args[key] = StreamRestorer(self.state.vault)
                fn["arguments"] = r.feed(fn["arguments"])

    def _flush(self, index: int) -> str:
        self.finished.add(index)
        t = self.texts.get(index)
        return t.flush() if t is not None else ""

    def _flush_args(self, index: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for (ci, ti), r in self.args.items():
            rest = r.flush() if ci == index else ""
            if rest:
                out.append({"index": ti, "function": {"arguments": rest}})
        return out

    def tail(self) -> bytes:
        """Text still held for choices that never finished (the upstream stopped
        without a ``finish_reason``), as one closing event."""
        choices: list[dict[str, Any]] = []
        for index in sorted(set(self.texts) - self.finished):
            rest = self._flush(index)
            if rest:
                choices.append(self.operation.text_choice(index, rest))
        if not choices:
            return b""
        obj = {"id": f"chatcmpl-{self.ctx.request_id}",
               "object": self.operation.chunk_object,
               "created": int(time.time()), "model": self.ctx.response_model or self.ctx.alias,
               "choices": choices}
        return frame(obj)

    def record(self) -> None:
        for t in self.texts.values():
            if t.guard is not None:
                self.state.note_pii("response", t.guard.findings)


async def guard_events(
    ctx: RequestContext, state: GuardState, resp: UpstreamResponse,
    events: AsyncIterator[bytes],
) -> AsyncIterator[bytes]:
    """The upstream's stream items with the output guard applied. A disallowed tool
    call or a blocked entity ends the stream with an error event (nothing of the
    offending event is sent)."""
    rw = StreamRewrite(ctx, state)
    try:
        async for item in events:
            out = [rw.event(ev) for ev in item.split(b"\n\n") if ev]
            if out:
                out.append(b"")
                yield b"\n\n".join(out)
        tail = rw.tail()
        if tail:
            yield tail
    except GatewayError as err:
        if isinstance(err, PiiBlocked):
            state.note_blocked("response", err.entity_types)
        await resp.aclose()
        yield frame(envelope(err))
        # set after the relay absorbed the error event (it marks it upstream_error)
        ctx.status, ctx.error_code, ctx.http_status = "error", err.code, err.status
    finally:
        rw.record()
