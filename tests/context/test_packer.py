"""The packer: never over the budget (exact counts, three tokenizers), duplicates and
near duplicates dropped, citations pointing at the right documents, the accounting
adding up."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.context.analysis import AnalysisCache
from tokenplane.context.documents import Document, PackOptions
from tokenplane.context.packer import ContextPacker
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TokenizerRegistry

SPECS = ("tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct", "deepseek")


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Tokenizer]:
    reg = TokenizerRegistry()
    return {spec: reg.get(spec) for spec in SPECS}


WORDS = ["the", "cat", "sat", "on", "mat", "model", "tokens", "budget", "Paris", "river",
         "data", "42", "3.14", "e-mail", "naïve", "über", "模型", "预算", "上下文", "检索",
         "我们", "。", "，", ".", "!", "?", "\n", "  ", "🙂", "—", "[1]"]


def _text() -> st.SearchStrategy[str]:
    word = st.sampled_from(WORDS) | st.text(max_size=8)
    return st.lists(word, max_size=120).map(lambda ws: " ".join(ws))


def _docs() -> st.SearchStrategy[list[Document]]:
    return st.lists(_text(), max_size=25).flatmap(lambda texts: st.tuples(
        st.just(texts),
        st.lists(st.none() | st.floats(-10, 10), min_size=len(texts), max_size=len(texts)),
        st.lists(st.none() | st.sampled_from(["wiki", "手册", "a b"]), min_size=len(texts),
                 max_size=len(texts)),
    )).map(lambda t: [Document(f"d{i}", text, score, source)
                      for i, (text, score, source) in enumerate(zip(*t, strict=True))])


def _account(packed, docs: list[Document], tok: Tokenizer) -> None:
    """offered == kept + dropped; every document once, whole or cut (then also in
    dropped as 'truncated')."""
    assert packed.offered_tokens == sum(tok.count(d.text) for d in docs)
    assert packed.kept_tokens + packed.dropped_tokens == packed.offered_tokens
    kept = {k.id for k in packed.kept}
    gone = [d.id for d in packed.dropped if d.reason != "truncated"]
    assert len(gone) == len(set(gone))
    assert kept.isdisjoint(gone)
    assert kept | set(gone) == {d.id for d in docs}
    cut = {d.id for d in packed.dropped if d.reason == "truncated"}
    assert cut == {k.id for k in packed.kept if k.truncated}
    assert len(cut) <= 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=_docs(), budget=st.integers(0, 1500), spec=st.sampled_from(SPECS),
       query=_text(), original=st.booleans(), header=st.booleans(), joins=st.booleans())
def test_never_over_budget_exact_counts(tokenizers: dict[str, Tokenizer], docs: list[Document],
                                        budget: int, spec: str, query: str, original: bool,
                                        header: bool, joins: bool) -> None:
    """Also with the block counted from its pieces (``joins``): the same result."""
    tok = tokenizers[spec]
    opts = PackOptions(order="original" if original else "relevance",
                       header=PackOptions().header if header else "",
                       rank="bm25")
    packed = ContextPacker().pack(query, docs, budget, tok.count, opts,
                                  joins=tok if joins else None)  # type: ignore[arg-type]
    if joins:
        whole = ContextPacker().pack(query, docs, budget, tok.count, opts)
        assert (packed.text, packed.tokens, packed.kept, packed.dropped, packed.citations,
                packed.offered_tokens) == (whole.text, whole.tokens, whole.kept,
                                           whole.dropped, whole.citations,
                                           whole.offered_tokens)
    assert packed.tokens == (tok.count(packed.text) if packed.text else 0)
    assert packed.tokens <= budget
    _account(packed, docs, tok)
    assert [k.marker for k in packed.kept] == list(range(1, len(packed.kept) + 1))
    assert packed.citations == {str(k.marker): k.id for k in packed.kept}
    if original:
        assert [k.index for k in packed.kept] == sorted(k.index for k in packed.kept)


PARAGRAPH = (
    "The gateway counts every prompt with the model's own tokenizer before it runs. "
    "Budgets are reserved at every scope in one atomic step, and settled with the real "
    "usage once the answer is complete. Streams are relayed as bytes, and the output is "
    "debited before it is forwarded to the client, so a budget can never be overrun by "
    "more than one debit. Retries go to another replica only before the first token. ")
PARAGRAPH_ZH = (
    "网关在请求运行之前，用模型自己的分词器统计每个提示的令牌数。预算在每个范围内一次性原子地预留，"
    "并在回答完成后按实际用量结算。流式输出按字节转发，输出在转发给客户端之前先扣减，"
    "因此预算最多只会超出一次扣减的量。重试只在第一个令牌之前转到另一个副本。")
OTHER = ("Rivers in the north freeze in winter; the ferries stop and the towns are reached "
         "by road. In spring the ice breaks up and the boats return.")
OTHER_ZH = "北方的河流冬天会结冰，渡轮停运，人们只能走公路。春天冰雪融化，船只又回来了。"


def _edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_duplicates_and_near_duplicates_are_dropped(tokenizers: dict[str, Tokenizer]) -> None:
    docs = [
        Document("a", PARAGRAPH),
        Document("a-copy", PARAGRAPH.upper().replace(",", " ;")),  # same units
        Document("a-near", _edit(PARAGRAPH, "atomic", "single")),  # one word changed
        Document("zh", PARAGRAPH_ZH),
        Document("zh-near", _edit(PARAGRAPH_ZH, "原子地", "整体地")),
        Document("other", OTHER),
        Document("other-zh", OTHER_ZH),
    ]
    for spec, tok in tokenizers.items():
        packed = ContextPacker().pack("", docs, 10_000, tok.count,
                                      PackOptions(order="original"))
        reasons = {d.id: (d.reason, d.of) for d in packed.dropped}
        assert reasons == {"a-copy": ("duplicate", "a"), "a-near": ("near_duplicate", "a"),
                           "zh-near": ("near_duplicate", "zh")}, spec
        assert [k.id for k in packed.kept] == ["a", "zh", "other", "other-zh"]
        _account(packed, docs, tok)


def test_dedup_off_and_threshold(tokenizers: dict[str, Tokenizer]) -> None:
    tok = tokenizers["tiktoken:cl100k_base"]
    docs = [Document("a", PARAGRAPH), Document("b", _edit(PARAGRAPH, "atomic", "single"))]
    assert len(ContextPacker().pack("", docs, 10_000, tok.count,
                                    PackOptions(dedup=False)).kept) == 2
    assert len(ContextPacker().pack("", docs, 10_000, tok.count,
                                    PackOptions(near_duplicate_threshold=0.99)).kept) == 2


def _blocks(text: str) -> dict[str, str]:
    """marker -> the text after it, from the packed block."""
    out: dict[str, str] = {}
    for block in text.split("\n\n"):
        m = re.match(r"\[(\d+)\] (?:\(([^)]*)\) )?(.*)", block, re.S)
        if m:
            out[m.group(1)] = m.group(3)
    return out


def test_citations_point_at_the_right_documents(tokenizers: dict[str, Tokenizer]) -> None:
    tok = tokenizers["qwen:qwen2.5-72b-instruct"]
    docs = [Document(f"doc-{i}", f"Fact number {i}: the value of item {i} is {i * 7}.",
                     score=float(i % 5), source=f"src{i}") for i in range(12)]
    packed = ContextPacker().pack("anything", docs, 10_000, tok.count)
    blocks = _blocks(packed.text)
    by_id = {d.id: d for d in docs}
    assert set(blocks) == set(packed.citations)
    for marker, doc_id in packed.citations.items():
        assert blocks[marker] == by_id[doc_id].text
        assert f"[{marker}] ({by_id[doc_id].source}) " in packed.text
    # ranked by score, highest first, ties in the given order
    assert [k.id for k in packed.kept][:3] == ["doc-4", "doc-9", "doc-3"]


def test_bm25_ranks_by_the_question_english_and_chinese(tokenizers: dict[str, Tokenizer]
                                                        ) -> None:
    tok = tokenizers["deepseek"]
    docs = [Document("rivers", OTHER), Document("gateway", PARAGRAPH),
            Document("rivers-zh", OTHER_ZH), Document("gateway-zh", PARAGRAPH_ZH)]
    packed = ContextPacker().pack("When do the boats return after the ice?", docs, 10_000,
                                  tok.count)
    assert packed.kept[0].id == "rivers"
    packed = ContextPacker().pack("预算怎么结算？", docs, 10_000, tok.count)
    assert packed.kept[0].id == "gateway-zh"
    packed = ContextPacker().pack("渡轮什么时候停运", docs, 10_000, tok.count)
    assert packed.kept[0].id == "rivers-zh"


class _Reverse:
    def scores(self, query: str, texts: list[str]) -> list[float]:
        return [float(-i) for i in range(len(texts))]


def test_a_plugged_ranker_replaces_bm25(tokenizers: dict[str, Tokenizer]) -> None:
    tok = tokenizers["deepseek"]
    docs = [Document("x", OTHER), Document("y", PARAGRAPH)]
    packed = ContextPacker(ranker=_Reverse()).pack("gateway budgets tokens", docs, 10_000,
                                                   tok.count)
    assert [k.id for k in packed.kept] == ["x", "y"]


@pytest.mark.parametrize("text", [PARAGRAPH * 3, PARAGRAPH_ZH * 3])
def test_the_best_remaining_document_is_cut_at_a_sentence(tokenizers: dict[str, Tokenizer],
                                                          text: str) -> None:
    tok = tokenizers["tiktoken:cl100k_base"]
    docs = [Document("short", OTHER, score=1.0), Document("long", text, score=2.0)]
    budget = tok.count(text) // 2
    packed = ContextPacker().pack("", docs, budget, tok.count, PackOptions(header=""))
    assert packed.tokens <= budget
    kept = {k.id: k for k in packed.kept}
    assert kept["long"].truncated and not kept["short"].truncated
    cut = _blocks(packed.text)[str(kept["long"].marker)]
    assert text.startswith(cut) and len(cut) < len(text)
    assert cut.endswith((".", "。"))
    _account(packed, docs, tok)
    # without truncation, the long one is dropped for the budget
    packed = ContextPacker().pack("", docs, budget, tok.count,
                                  PackOptions(header="", truncate=False))
    assert {d.id: d.reason for d in packed.dropped} == {"long": "budget"}


def test_empty_documents_and_tiny_budgets(tokenizers: dict[str, Tokenizer]) -> None:
    tok = tokenizers["tiktoken:cl100k_base"]
    docs = [Document("blank", "   "), Document("a", OTHER)]
    packed = ContextPacker().pack("", docs, 0, tok.count)
    assert packed.text == "" and packed.tokens == 0 and not packed.kept
    assert {d.id: d.reason for d in packed.dropped} == {"blank": "empty", "a": "budget"}


def test_scores_on_some_documents_only_fall_back_to_bm25(tokenizers: dict[str, Tokenizer]
                                                         ) -> None:
    tok = tokenizers["tiktoken:cl100k_base"]
    docs = [Document("a", OTHER, score=5.0), Document("b", PARAGRAPH)]
    packed = ContextPacker().pack("replica retries budgets", docs, 10_000, tok.count)
    assert packed.kept[0].id == "b"
    with pytest.raises(ValueError, match="score"):
        ContextPacker().pack("", docs, 10_000, tok.count, PackOptions(rank="scores"))


@pytest.mark.parametrize("joins", [False, True])
def test_deferred_accounting_counts_only_what_the_decision_needs(joins: bool) -> None:
    """With a floor, documents that cannot fit are not counted (nor analysed) by the
    decision; ``settle`` completes the accounting to exactly the undeferred result; and
    the same with the block counted from its pieces and floors given their bound."""

    tok = TokenizerRegistry().get("tiktoken:cl100k_base")
    body = "The gateway reserves tokens before it runs and settles them after. "
    docs = [Document(f"d{i}", f"Document {i} says: " + body * (3 + i % 4)) for i in range(30)]
    docs.append(Document("copy", docs[0].text))
    counted: list[str] = []

    def count(t: str) -> int:
        counted.append(t)
        return tok.count(t)

    full = ContextPacker().pack("How are tokens reserved?", docs, 300, tok.count)
    cache = AnalysisCache()
    lazy = ContextPacker(cache=cache).pack("How are tokens reserved?", docs, 300, count,
                                           floor=tok.token_floor, defer=True,
                                           joins=tok if joins else None)  # type: ignore[arg-type]
    texts = {d.text for d in docs}
    assert not lazy.settled and len(texts & set(counted)) < len(texts) // 2
    assert cache.misses < len(docs) // 2  # only the documents considered were analysed
    assert lazy.text == full.text and lazy.tokens == full.tokens <= 300
    assert lazy.kept == full.kept and lazy.citations == full.citations
    lazy.settle()
    assert lazy.settled and lazy.dropped == full.dropped
    assert lazy.offered_tokens == full.offered_tokens == sum(tok.count(d.text) for d in docs)
    assert lazy.offered_tokens == lazy.kept_tokens + lazy.dropped_tokens
    assert "budget" in {d.reason for d in lazy.dropped}


def test_bm25_reads_ascii_text_without_hashing_the_same_scores() -> None:
    """ASCII texts are scored from their units' string (``bm25.ascii_terms``), others
    from unit hashes: the scores are the same either way, and an empty last document
    does not take the unit before it away (it did: ``reduceat`` was clamped)."""
    from tokenplane.context.analysis import unit_hashes
    from tokenplane.context.bm25 import bm25_scores

    docs = ["Budgets are reserved, then settled. Budgets!", "网关 预算 budget settled",
            "it's the stream that ends", "settled budgets", ""]
    query = "How are budgets settled? 预算"
    by_terms = bm25_scores([AnalysisCache().terms(d) for d in docs], query)
    by_hashes = bm25_scores([unit_hashes(d) for d in docs], query)
    assert by_terms == by_hashes and by_terms[4] == 0.0
    with_empty = bm25_scores([unit_hashes(d) for d in ["budgets", "settled", ""]], "settled")
    assert with_empty[1] > 0  # the last unit before an empty document counts
