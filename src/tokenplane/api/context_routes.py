"""``POST /v1/context/pack``: the packer as a call of its own, for applications that
want the packed text back (docs/CONTEXT.md). The body: ``model`` (whose tokenizer
counts), ``documents``, ``budget_tokens``, and either ``messages`` (the last user
message is the query BM25 ranks against) or ``query``, and ``options``; the answer:
``{text, tokens, citations, kept, dropped, offered_tokens, kept_tokens,
dropped_tokens}``. The same packer and counts as a chat request's
``tokenplane.context``; any key may call it (nothing is sent upstream, nothing billed),
but the limits count it like any request: one request and the tokens it counted
(every offered document's) against the caller's rates (429 when spent,
``admission/gateway/side_calls.py``). Bounded like a chat's documents
(``context.max_documents``, ``context.max_characters``: 400), and packed off the
event loop, in turn per tenant (``pipeline/count_offload.py``), when the body is
large.
With governance, the documents are screened for prompt injection by the caller's
policy as a chat's are (``pipeline/document_guard.py``: dropped with reason
``injection``, or a 400 ``prompt_injection_blocked``; a flagged one sets
``x-tokenplane-injection: flagged``). The PII rules are not applied: the text goes
back to whoever sent it, and a chat that sends it on applies the prompt rules then.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import orjson
from aiohttp import web

from tokenplane.admission.gateway.side_calls import SideAdmission
from tokenplane.api.admin_usage import authenticate
from tokenplane.config.context_schema import ContextConfig
from tokenplane.config.schema import ModelConfig
from tokenplane.context.documents import Document, Packed
from tokenplane.context.packer import ContextPacker, has_all_scores
from tokenplane.context.wire import documents, duplicate_id, options, packed_json, user_turn
from tokenplane.errors import GatewayError, invalid
from tokenplane.governance.document_guard import guards_documents
from tokenplane.governance.guard_state import INJECTION_HEADER, GuardState
from tokenplane.meta.keystore import KeyStore
from tokenplane.operations import validate as v
from tokenplane.operations.context_fields import pack_body
from tokenplane.operations.fields import Obj
from tokenplane.operations.schemas import chat_messages
from tokenplane.pipeline.count_offload import OFFLOAD_BYTES, CountOffload
from tokenplane.pipeline.document_guard import DocumentGuard
from tokenplane.pipeline.guard_stages import check_model

PATH = "/v1/context/pack"


def body_spec() -> Obj:
    return pack_body(chat_messages())


class ContextRoutes:
    def __init__(self, keys: KeyStore, models: dict[str, ModelConfig],
                 count_text: Callable[[ModelConfig, str], int],
                 allowed: Callable[[str], set[str] | None], config: ContextConfig,
                 packer: ContextPacker | None = None, guard: DocumentGuard | None = None,
                 *, offload: CountOffload | None = None,
                 admission: SideAdmission | None = None) -> None:
        self.keys = keys
        self.models = models
        self.count_text = count_text
        self.allowed = allowed
        self.config = config
        self.packer = packer if packer is not None else ContextPacker()
        self.guard = guard
        self.offload = offload if offload is not None else CountOffload()
        self.admission = admission
        self.spec = body_spec()

    def install(self, app: web.Application) -> None:
        app.router.add_post(PATH, self.pack)

    async def pack(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        if self.admission is not None:  # past its rate already: refused before parsing
            self.admission.precheck(principal)
        v.check_content_type(request.headers.get("content-type"))
        data = await request.read()
        body = v.parse_json_object(data)
        self.spec.check(body)
        alias = body["model"]
        model = self.models.get(alias)
        allowed = self.allowed(principal.tenant)
        if model is None or (allowed is not None and alias not in allowed):
            raise GatewayError(404, f"The model '{alias}' does not exist or you do not have "
                               "access to it.", param="model", code="model_not_found",
                               type_="invalid_request_error")
        policy = None
        if self.guard is not None:
            policy = self.guard.policy(principal.tenant, principal.app)
            check_model(alias, policy)
        items = body["documents"]
        if len(items) > self.config.max_documents:
            raise invalid(f"'documents' has {len(items)} documents; at most "
                          f"{self.config.max_documents} are accepted.", param="documents",
                          code="too_many_documents")
        chars = sum(len(d["text"]) for d in items)
        if chars > self.config.max_characters:
            raise invalid(f"'documents' hold {chars} characters; at most "
                          f"{self.config.max_characters} are accepted.", param="documents",
                          code="context_too_large")
        dup = duplicate_id(items)
        if dup is not None:
            raise invalid(f"'documents[{dup}].id' repeats the id {items[dup]['id']!r}",
                          param=f"documents[{dup}].id", code="invalid_value")
        raw = body.get("options") or {}
        if raw.get("placement") is not None:
            raise invalid("'options.placement' applies to chat requests only",
                          param="options.placement", code="invalid_value")
        opts = options(raw)
        docs = documents(items)
        if opts.rank == "scores" and not has_all_scores(docs):
            raise invalid("'options.rank' is 'scores' but not every document has a score",
                          param="options.rank", code="invalid_value")
        query = body.get("query")
        if query is None:
            query = user_turn(body.get("messages"))

        def count(t: str) -> int:
            return self.count_text(model, t)

        def pack(kept: list[Document]) -> Packed:
            # settled before answering (no ``defer``): the caller asked for the
            # accounting, so every dropped document's tokens are exact in the answer
            return self.packer.pack(query, kept, body["budget_tokens"], count, opts)

        headers: dict[str, str] = {}

        def work() -> Packed:
            if self.guard is None or policy is None or not guards_documents(policy, pii=False):
                return pack(docs)
            packed, screened = self.guard.pack(principal.tenant, GuardState(policy), docs,
                                               "documents", pack, count, pii=False)
            if screened.flagged:
                headers[INJECTION_HEADER] = "flagged"
            return packed

        grant = (await self.admission.admit(principal, alias, uuid.uuid4().hex)
                 if self.admission is not None else None)
        counted = 0
        try:
            if len(data) >= OFFLOAD_BYTES:
                # many documents: counted and analysed on a worker thread, in turn per
                # tenant, so one tenant's packs never hold the loop or another's turn
                packed = await self.offload.run(principal.tenant, work)
            else:
                packed = work()
            counted = packed.offered_tokens
        finally:
            if self.admission is not None:
                await self.admission.settle(grant, counted)
        return web.Response(body=orjson.dumps({"object": "context.pack", "model": alias,
                                               **packed_json(packed)}),
                            content_type="application/json", headers=headers)
