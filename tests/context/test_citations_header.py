"""The citations header stays ASCII and bounded: the first markers that fit, and how
many were left out."""

from __future__ import annotations

import json

from tokenplane.pipeline.context_stage import MAX_HEADER, citations_header


def test_small_maps_whole_and_large_ones_bounded() -> None:
    assert citations_header({"1": "a", "2": "文档-7"}) == ('{"1":"a","2":"\\u6587\\u6863-7"}', 0)
    big = {str(i): f"doc-{i}-" + "é" * 250 for i in range(1, 101)}
    text, omitted = citations_header(big)
    assert text.isascii() and len(text) <= MAX_HEADER
    shown = json.loads(text)
    assert omitted == 100 - len(shown) > 0
    assert list(shown) == [str(i) for i in range(1, len(shown) + 1)]
    assert all(shown[k] == big[k] for k in shown)
    # one more entry would not have fit
    more = dict(list(big.items())[:len(shown) + 1])
    assert len(json.dumps(more, separators=(",", ":"))) > MAX_HEADER
