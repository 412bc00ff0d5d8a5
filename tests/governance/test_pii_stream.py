from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.pii_policy import PiiAction, PiiBlocked, PiiPolicy, apply
from tokenplane.governance.pii_stream import PiiStreamMasker
from tokenplane.governance.vault import Vault

from .factories import cn_id, luhn_card

POLICY = PiiPolicy(
    actions={"CN_MOBILE": PiiAction.TOKENIZE, "EMAIL_ADDRESS": PiiAction.LOG},
    default=PiiAction.MASK,
)

values = st.sampled_from(
    [
        cn_id(),
        "13800138000",
        "+86 139 1234 5678",
        "john@example.com",
        luhn_card("622202", 19),
        "192.168.1.20",
        "password: Xy7#kLm92pQ",
    ]
)
filler = st.text(alphabet=st.sampled_from(list("ab c,。你好\n-")), max_size=10)


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    out, prev = [], 0
    for p in points:
        out.append(text[prev:p])
        prev = p
    out.append(text[prev:])
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(filler, values), min_size=1, max_size=5),
    filler,
    st.lists(st.integers(0, 10_000), max_size=25),
)
def test_streamed_equals_whole_text(
    pairs: list[tuple[str, str]], tail: str, cuts: list[int]
) -> None:
    text = "".join(f + " " + v + " " for f, v in pairs) + tail
    whole_vault, stream_vault = Vault(), Vault()
    expected, whole_findings = apply(text, POLICY, whole_vault)
    guard = PiiStreamMasker(POLICY, stream_vault)
    shown = "".join(guard.feed(c) for c in _chunks(text, cuts)) + guard.flush()
    assert shown == expected
    assert stream_vault.placeholders() == whole_vault.placeholders()
    assert guard.findings == whole_findings


def test_value_split_across_chunks_never_shown() -> None:
    guard = PiiStreamMasker(PiiPolicy(), Vault(), hold=32)
    out = [guard.feed(c) for c in ["id 110105", "19491231", "002X and more text " * 3]]
    out.append(guard.flush())
    joined = "".join(out)
    assert "11010519491231002X" not in joined and "110105********002X" in joined
    assert [(f.entity_type, f.start, f.end) for f in guard.findings] == [("CN_ID_CARD", 3, 21)]


def test_block_raises() -> None:
    guard = PiiStreamMasker(PiiPolicy(default=PiiAction.BLOCK), Vault(), hold=8)
    guard.feed("the card ")
    with pytest.raises(PiiBlocked):
        guard.feed(luhn_card("622202", 16) + " was used yesterday afternoon")
