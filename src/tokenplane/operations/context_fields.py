"""The field specs of RAG context packing (docs/CONTEXT.md): the ``tokenplane``
extension object of a chat body, a message's ``tokenplane`` marks, and the body of
``POST /v1/context/pack``. Unknown fields are refused here (``extra=False``): a
misspelt option must not be ignored silently. The ``tokenplane`` objects never reach
the upstream (the context stage removes them)."""

from __future__ import annotations

from tokenplane.operations.fields import Arr, Bool, Enum, Int, Num, Obj, Spec, Str

EXTENSION = "tokenplane"


def _document(score_doc: str) -> Obj:
    return Obj({
        "id": Str(min_len=1, max_len=256, description="cited as [n] -> this id"),
        "text": Str(),
        "score": Num(description=score_doc),
        "source": Str(max_len=512, description="shown after the marker: [n] (source)"),
        "metadata": Obj({}, description="kept with the document, not sent to the model"),
    }, ("id", "text"), extra=False)


def pack_options() -> Obj:
    return Obj({
        "dedup": Bool(description="drop exact and near duplicates (default true)"),
        "near_duplicate_threshold": Num(0, 1, description="Jaccard similarity of 3-unit "
                                        "shingles at which a document is a near duplicate "
                                        "(default 0.8)"),
        "rank": Enum("auto", "scores", "bm25", description="auto: the scores when every "
                     "document has one, else relevance to the user's turn"),
        "order": Enum("relevance", "original"),
        "truncate": Bool(description="cut the best document that does not fit at a "
                         "sentence boundary (default true)"),
        "header": Str(max_len=2000, description="the line before the documents"),
        "placement": Enum("system", "user", description="the message the documents go "
                          "in (chat requests only)"),
    }, extra=False)


def _documents() -> Arr:
    return Arr(_document("higher is more relevant; with a score on every document they "
                         "rank by it"), min_items=1)


def context_object() -> Obj:
    return Obj({
        "documents": _documents(),
        "budget_tokens": Int(1, description="the packed block's token budget"),
        "budget_share": Num(0, 1, description="the budget as a share of the model's "
                            "context window (more than 0)"),
        "options": pack_options(),
    }, ("documents",), extra=False,
        description="retrieved documents the gateway packs into the prompt")


def extension() -> Obj:
    """The chat body's ``tokenplane`` object."""
    return Obj({"context": context_object()}, extra=False,
               description="tokenplane's extensions (removed before the upstream)")


def message_marks() -> Spec:
    """A message's ``tokenplane`` object."""
    return Obj({"pinned": Bool(description="never dropped when history is trimmed")},
               extra=False)


def pack_body(messages: Spec) -> Obj:
    """``POST /v1/context/pack``."""
    return Obj({
        "model": Str(min_len=1, description="the alias whose tokenizer counts"),
        "messages": messages,
        "query": Str(description="ranked against instead of the last user message"),
        "documents": _documents(),
        "budget_tokens": Int(1),
        "options": pack_options(),
    }, ("model", "documents", "budget_tokens"), extra=False)
