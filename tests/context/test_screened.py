"""A pack of the documents left after screening, told as a pack of all of them
(``context/screened.py``): the packer's decision is the one it makes on the kept
documents alone, every index is the request's, the left-out documents are dropped with
their reason and counted, and ``offered == kept + dropped`` over every document
offered, settled at once or deferred."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.context.test_packer import _docs, _text
from tokenplane.context.documents import Document
from tokenplane.context.packer import ContextPacker
from tokenplane.context.screened import screened_documents, with_left_out
from tokenplane.tokens.registry import TokenizerRegistry

TOKENIZER = TokenizerRegistry().get("tiktoken:cl100k_base")


def _count(text: str) -> int:
    return TOKENIZER.count(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=_docs(), out=st.sets(st.integers(0, 24)), budget=st.integers(0, 1200),
       query=_text(), defer=st.booleans())
def test_left_out_documents_are_dropped_and_accounted(
        docs: list[Document], out: set[int], budget: int, query: str, defer: bool) -> None:
    out = {i for i in out if i < len(docs)}
    positions = [i for i in range(len(docs)) if i not in out]
    kept_docs = [docs[i] for i in positions]
    packer = ContextPacker()
    alone = packer.pack(query, kept_docs, budget, _count)
    packed = with_left_out(packer.pack(query, kept_docs, budget, _count, defer=defer),
                           positions, [(i, docs[i]) for i in sorted(out)], "injection",
                           _count)
    # the decision is the packer's on what was kept
    assert (packed.text, packed.tokens, packed.citations) == \
        (alone.text, alone.tokens, alone.citations)
    assert [(k.id, k.tokens, k.truncated) for k in packed.kept] == \
        [(k.id, k.tokens, k.truncated) for k in alone.kept]
    assert packed.settled is (not defer)
    packed.settle()
    # every index is the request's
    for k in packed.kept:
        assert docs[k.index].id == k.id
    for d in packed.dropped:
        assert docs[d.index].id == d.id
    assert [d.index for d in packed.dropped] == sorted(d.index for d in packed.dropped)
    injected = [d for d in packed.dropped if d.reason == "injection"]
    assert sorted(d.index for d in injected) == sorted(out)
    assert all(d.tokens == _count(docs[d.index].text) for d in injected)
    # the accounting is over every document offered
    assert packed.offered_tokens == sum(_count(d.text) for d in docs)
    assert packed.kept_tokens + packed.dropped_tokens == packed.offered_tokens
    kept = {k.id for k in packed.kept}
    gone = [d.id for d in packed.dropped if d.reason != "truncated"]
    assert len(gone) == len(set(gone)) and kept.isdisjoint(gone)
    assert kept | set(gone) == {d.id for d in docs}


def test_screened_texts_replace_the_documents_texts_only() -> None:
    docs = [Document("a", "one", 0.5, "kb", {"u": 1}), Document("b", "two"),
            Document("c", "three")]
    got = screened_documents(docs, ["ONE", "three"], [0, 2])
    assert got == [Document("a", "ONE", 0.5, "kb", {"u": 1}), docs[2]]
    assert got[1] is docs[2]  # unchanged text: the same document
