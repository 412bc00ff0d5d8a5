"""The context stage (after validation, before the input guard and counting):
takes tokenplane's extension objects out of a chat body and acts on them.

- ``tokenplane.context``: the documents are packed (``context/packer.py``) with the
  model's own tokenizer into a budget, and the block goes into the prompt as a message
  of its own named ``context`` (so it counts as the ``context`` source): a ``system``
  message right after the leading system prompt (the default: the prompt's prefix
  stays cacheable and the user's turn is left as written) or, with ``placement:
  user``, a ``user`` message just before the current turn. Everything after (the
  guard, counting, admission, the window check) sees the prompt as it is sent. A
  large request (``OFFLOAD_BYTES`` or more) is packed on a worker thread, in turn per
  tenant, like a large prompt's count (``pipeline/count_offload.py``).
  The budget: ``budget_tokens``, else ``budget_share`` of the window, else the
  configured default share, never more than the window less the rest of the prompt
  and the output reservation; under ``on_overflow: trim_history`` the rest is what
  trimming keeps (system, pinned, the current turn): the documents come before old
  history, which the tokens stage then trims to fit around them. The answer carries
  the citation map: the ``x-tokenplane-citations`` header (compact JSON, marker ->
  document id; every answer, streams too) and a ``tokenplane`` object on a
  non-stream body. With governance, the documents are screened first by the
  caller's policy (``pipeline/document_guard.py``: prompt injection, PII rules): a
  dropped one is never packed and is reported dropped with reason ``injection``.
- ``tokenplane.pinned`` on a message: noted for history trimming.

Neither object reaches the upstream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson

from tokenplane.config.context_schema import ContextConfig
from tokenplane.context.documents import Document, Packed
from tokenplane.context.packer import ContextPacker, has_all_scores
from tokenplane.context.trim import always_kept
from tokenplane.context.wire import documents, duplicate_id, options, user_turn
from tokenplane.errors import invalid
from tokenplane.governance.document_guard import ScreenedDocuments
from tokenplane.operations.context_fields import EXTENSION
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.count_offload import OFFLOAD_BYTES, CountOffload
from tokenplane.pipeline.document_guard import DocumentGuard
from tokenplane.pipeline.overflow import REJECT, Overflow
from tokenplane.tokens.model_counters import ModelCounters

CITATIONS_HEADER = "x-tokenplane-citations"
CITATIONS_OMITTED = "x-tokenplane-citations-omitted"
MAX_HEADER = 8192  # bytes of the citations header (clients cap a head at 16-64 KiB)
CONTEXT_NAME = "context"


def strip_marks(messages: list[Any]) -> tuple[list[Any], frozenset[int]]:
    """The messages without their ``tokenplane`` objects (copied only where one is),
    and the indices of the pinned ones."""
    pinned: set[int] = set()
    out: list[Any] | None = None
    for i, m in enumerate(messages):
        if type(m) is dict and EXTENSION in m:
            if out is None:
                out = list(messages)
            marks = m[EXTENSION]
            if isinstance(marks, dict) and marks.get("pinned") is True:
                pinned.add(i)
            out[i] = {k: v for k, v in m.items() if k != EXTENSION}
    return (out if out is not None else messages), frozenset(pinned)


def insert_at(messages: list[Any], placement: str) -> int:
    """Where the context message goes: after the leading system / developer messages,
    or just before the last user message."""
    if placement == "user":
        return max((i for i, m in enumerate(messages) if m.get("role") == "user"),
                   default=len(messages))
    i = 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        i += 1
    return i


class ContextStage:
    """``guard``: the governance policy on the documents (None: governance off)."""

    def __init__(self, counters: ModelCounters, config: ContextConfig,
                 overflow: Overflow | None = None, offload: CountOffload | None = None,
                 packer: ContextPacker | None = None, guard: DocumentGuard | None = None
                 ) -> None:
        self.counters = counters
        self.config = config
        self.overflow = overflow
        self.offload = offload
        self.packer = packer if packer is not None else ContextPacker()
        self.guard = guard

    async def run(self, ctx: RequestContext) -> None:
        field = ctx.operation.messages_field
        if field is None:
            return
        body = ctx.body
        messages = body.get(field)
        if not isinstance(messages, list):
            return
        ext = body.get(EXTENSION)
        messages, pinned = strip_marks(messages)
        if ext is None and messages is body[field]:
            return
        body = {k: v for k, v in body.items() if k != EXTENSION}
        body[field] = messages
        ctx.body = body
        ctx.pinned = pinned
        spec = ext.get("context") if isinstance(ext, dict) else None
        if spec is not None:
            await self._pack(ctx, field, spec)

    def _requested(self, spec: dict[str, Any], window: int) -> int:
        """The budget the request asks for (before the room the prompt leaves)."""
        tokens, share = spec.get("budget_tokens"), spec.get("budget_share")
        if tokens is not None and share is not None:
            raise invalid("Give 'tokenplane.context.budget_tokens' or 'budget_share', not "
                          "both.", param="tokenplane.context.budget_share",
                          code="invalid_value")
        if share is not None and share <= 0:
            raise invalid(f"'tokenplane.context.budget_share' must be greater than 0, got "
                          f"{share}", param="tokenplane.context.budget_share",
                          code="invalid_value")
        if tokens is None:
            tokens = int(window * (share if share is not None
                                   else self.config.default_budget_share))
        return int(tokens)

    def _room(self, ctx: RequestContext, field: str, placement: str, requested: int) -> int:
        """``requested``, at most what the rest of the prompt and the output leave (the
        prompt counted with an empty context message in place)."""
        assert ctx.model is not None
        policy = self.overflow.policy(ctx) if self.overflow is not None else REJECT
        messages = ctx.body[field]
        if policy.action == "trim_history":
            messages = always_kept(messages, ctx.pinned)
        probe = list(messages)
        probe.insert(insert_at(probe, placement),
                     {"role": placement, "name": CONTEXT_NAME, "content": ""})
        rest = self.counters.count(ctx.model, ctx.operation,
                                   {**ctx.body, field: probe}).counts.prompt
        reserve = ctx.max_tokens or policy.reserve
        return max(0, min(requested, ctx.model.context_window - rest - reserve))

    async def _pack(self, ctx: RequestContext, field: str, spec: dict[str, Any]) -> None:
        assert ctx.model is not None
        items = spec["documents"]
        if len(items) > self.config.max_documents:
            raise invalid(f"'tokenplane.context.documents' has {len(items)} documents; at "
                          f"most {self.config.max_documents} are accepted.",
                          param="tokenplane.context.documents", code="too_many_documents")
        chars = sum(len(d["text"]) for d in items)
        if chars > self.config.max_characters:
            raise invalid(f"'tokenplane.context.documents' hold {chars} characters; at most "
                          f"{self.config.max_characters} are accepted.",
                          param="tokenplane.context.documents", code="context_too_large")
        dup = duplicate_id(items)
        if dup is not None:
            param = f"tokenplane.context.documents[{dup}].id"
            raise invalid(f"'{param}' repeats the id {items[dup]['id']!r}", param=param,
                          code="invalid_value")
        raw_opts = spec.get("options") or {}
        opts = options(raw_opts)
        docs = documents(items)
        if opts.rank == "scores" and not has_all_scores(docs):
            raise invalid("'tokenplane.context.options.rank' is 'scores' but not every "
                          "document has a score", param="tokenplane.context.options.rank",
                          code="invalid_value")
        placement = raw_opts.get("placement") or self.config.placement
        requested = self._requested(spec, ctx.model.context_window)
        model = ctx.model
        guard = self.guard
        state = guard.prepare(ctx) if guard is not None else None

        def count(t: str) -> int:
            return self.counters.count_text(model, t)

        def floor(text: str, above: int) -> int:
            return self.counters.floor_text(model, text, above)

        def work() -> tuple[int, Packed, ScreenedDocuments | None]:
            budget = self._room(ctx, field, placement, requested)

            def pack(kept: list[Document]) -> Packed:
                return self.packer.pack(user_turn(ctx.body[field]), kept, budget, count, opts,
                                        floor, defer=True, joins=self.counters.joins(model))
            if guard is None or state is None:
                return budget, pack(docs), None
            # screened first (injection, PII): what is dropped is never packed
            return budget, *guard.pack(ctx.tenant or "", state, docs,
                                       "tokenplane.context.documents", pack, count)

        if self.offload is not None and len(ctx.raw) >= OFFLOAD_BYTES:
            # many documents: counted and analysed off the loop, in turn per tenant
            budget, packed, screened = await self.offload.run(ctx.tenant or "", work)
        else:
            budget, packed, screened = work()
        ctx.packed = packed
        message = None
        if packed.text:
            messages = list(ctx.body[field])
            at = insert_at(messages, placement)
            message = {"role": placement, "name": CONTEXT_NAME, "content": packed.text}
            messages.insert(at, message)
            ctx.body[field] = messages
            ctx.pinned = frozenset(i + 1 if i >= at else i for i in ctx.pinned) | {at}
        if guard is not None and screened is not None:
            guard.note(ctx, screened, message)
        header, omitted = citations_header(packed.citations)
        ctx.response_headers[CITATIONS_HEADER] = header
        if omitted:
            ctx.response_headers[CITATIONS_OMITTED] = str(omitted)
        if ctx.reply_extra is None:
            ctx.reply_extra = {}
        # the documents the decision never needed are counted on a worker thread while
        # the upstream answers; the body's object and the ledger wait for it
        ctx.settling = asyncio.ensure_future(self._settle(ctx, packed, budget))

    @staticmethod
    async def _settle(ctx: RequestContext, packed: Packed, budget: int) -> None:
        if not packed.settled:
            await asyncio.get_running_loop().run_in_executor(None, packed.settle)
        assert ctx.reply_extra is not None
        ctx.reply_extra["context"] = {
            "citations": packed.citations, "tokens": packed.tokens, "budget_tokens": budget,
            "kept": [k.id for k in packed.kept],
            "dropped": [{"id": d.id, "reason": d.reason, "tokens": d.tokens,
                         **({"duplicate_of": d.of} if d.of is not None else {})}
                        for d in packed.dropped],
            "offered_tokens": packed.offered_tokens, "kept_tokens": packed.kept_tokens,
            "dropped_tokens": packed.dropped_tokens,
        }


def citations_header(citations: dict[str, str]) -> tuple[str, int]:
    """The citation map as compact, ASCII-only JSON of at most ``MAX_HEADER`` bytes:
    the first markers that fit, and how many were left out (the body has them all)."""
    text = json.dumps(citations, separators=(",", ":"))
    if len(text) <= MAX_HEADER:
        return text, 0
    kept: dict[str, str] = {}
    size = 2
    for marker, doc_id in citations.items():
        entry = len(json.dumps({marker: doc_id}, separators=(",", ":"))) - 1
        if size + entry > MAX_HEADER:
            break
        kept[marker] = doc_id
        size += entry
    return json.dumps(kept, separators=(",", ":")), len(citations) - len(kept)


def with_extension(body: bytes, extra: dict[str, Any]) -> bytes:
    """A whole JSON answer with ``extra`` under its ``tokenplane`` key (merged with one
    already there); a body that is not a JSON object is left as it is."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(obj, dict):
        return body
    mine = obj.get(EXTENSION)
    obj[EXTENSION] = {**mine, **extra} if isinstance(mine, dict) else extra
    return orjson.dumps(obj)
