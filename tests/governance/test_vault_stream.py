from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.pii_policy import PiiAction, PiiPolicy, apply
from tokenplane.governance.vault import StreamRestorer, Vault

from .factories import cn_id

POLICY = PiiPolicy(default=PiiAction.TOKENIZE)

values = st.sampled_from(
    [cn_id(), "13800138000", "john@example.com", "192.168.1.20", cn_id("310101", "19800101", "111")]
)
filler = st.text(
    alphabet=st.sampled_from(list("abc <>_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789你好，。\n")),
    max_size=12,
)


def test_same_value_same_placeholder_and_numbering_per_type() -> None:
    vault = Vault()
    assert vault.tokenize("a", "CN_ID_CARD") == "<CN_ID_CARD_1>"
    assert vault.tokenize("b", "CN_ID_CARD") == "<CN_ID_CARD_2>"
    assert vault.tokenize("a", "CN_ID_CARD") == "<CN_ID_CARD_1>"
    assert vault.tokenize("c", "EMAIL_ADDRESS") == "<EMAIL_ADDRESS_1>"
    assert vault.restore("x <CN_ID_CARD_2> y <UNKNOWN_1>") == "x b y <UNKNOWN_1>"


def test_restore_json_escapes_values() -> None:
    vault = Vault()
    p = vault.tokenize('pa"ss\\word', "SECRET")
    args = '{"password": "' + p + '"}'
    assert json.loads(vault.restore_json(args)) == {"password": 'pa"ss\\word'}


def test_apply_tokenize_then_restore() -> None:
    vault = Vault()
    text = f"请核对身份证{cn_id()}和手机13800138000"
    out, findings = apply(text, POLICY, vault)
    assert out == "请核对身份证<CN_ID_CARD_1>和手机<CN_MOBILE_1>"
    assert [f.entity_type for f in findings] == ["CN_ID_CARD", "CN_MOBILE"]
    assert vault.restore(out) == text


def test_split_placeholder_is_held_then_restored() -> None:
    vault = Vault()
    vault.tokenize("11010519491231002X", "CN_ID_CARD")
    r = StreamRestorer(vault)
    assert r.feed("ID: <CN_") == "ID: "
    assert r.held == "<CN_"
    assert r.feed("ID_CARD_1> ok") == "11010519491231002X ok"
    assert r.feed("a < b") == "a < b"  # '<' followed by a space can start no placeholder
    assert r.feed(" <CN_ID_CARD_") == " "
    assert r.flush() == "<CN_ID_CARD_"  # model output ended mid-way: returned verbatim


def _chunks(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    out, prev = [], 0
    for p in points:
        out.append(text[prev:p])
        prev = p
    out.append(text[prev:])
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(filler, values), min_size=1, max_size=6),
    filler,
    st.lists(st.integers(0, 10_000), max_size=20),
)
def test_stream_restore_over_random_chunkings(
    pairs: list[tuple[str, str]], tail: str, cuts: list[int]
) -> None:
    original = "".join(f + v for f, v in pairs) + tail
    vault = Vault()
    tokenized, _ = apply(original, POLICY, vault)
    # What a model echoing the tokenized prompt would stream back.
    restorer = StreamRestorer(vault)
    shown: list[str] = []
    for chunk in _chunks(tokenized, cuts):
        piece = restorer.feed(chunk)
        # No placeholder and no fragment of one ever reaches the client.
        assert not any(p in piece for p in vault.placeholders())
        for placeholder in vault.placeholders():
            for k in range(2, len(placeholder)):
                assert not piece.endswith(placeholder[:k]) or (
                    original[: len("".join(shown)) + len(piece)].endswith(placeholder[:k])
                )
        shown.append(piece)
    shown.append(restorer.flush())
    assert "".join(shown) == original


@given(st.text(max_size=40), st.lists(st.integers(0, 100), max_size=8))
def test_restorer_is_transparent_without_placeholders(text: str, cuts: list[int]) -> None:
    vault = Vault()
    vault.tokenize("secret", "SECRET")
    restorer = StreamRestorer(vault)
    out = "".join(restorer.feed(c) for c in _chunks(text, cuts)) + restorer.flush()
    assert out == text.replace("<SECRET_1>", "secret")


def test_restorer_holds_back_at_most_one_placeholder_prefix() -> None:
    vault = Vault()
    vault.tokenize("v", "CN_MOBILE")
    r = StreamRestorer(vault)
    for ch in "hello <CN_MOBILE_1":
        r.feed(ch)
        assert len(r.held) < vault.longest
