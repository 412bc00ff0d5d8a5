from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.analyzer import Analyzer, builtin_recognizers
from tokenplane.governance.custom import RecognizerSpecError, recognizer_from_spec
from tokenplane.governance.pattern import PatternRecognizer
from tokenplane.governance.presidio_adapter import maybe_presidio, presidio_available
from tokenplane.governance.spans import Recognizer, Span, resolve_overlaps

from .factories import cn_id, luhn_card


def _reference(r: Recognizer) -> Recognizer:
    """The same recognizer written the slow, obvious way: a leading look-behind,
    case-blind matching instead of a lower-cased text, no prefilter or anchors."""
    if not isinstance(r, PatternRecognizer):
        return r
    pattern = r.pattern.pattern
    if r.not_after:
        pattern = "(?<![" + re.escape(r.not_after) + "])(?:" + pattern + ")"
    flags = r.pattern.flags | (re.IGNORECASE if r.match_lowered else 0)
    return PatternRecognizer(
        r.name,
        r.entity_type,
        re.compile(pattern, flags),
        r.score,
        r.validator,
        context=r.context,
        context_score=r.context_score,
        group=r.group,
    )


REFERENCE = Analyzer([_reference(r) for r in builtin_recognizers()])
FAST = Analyzer()

pieces = st.sampled_from(
    [
        cn_id(),
        "13800138000",
        "+86 139 1234 5678",
        luhn_card("622202", 19),
        "4111 1111 1111 1111",
        "john@example.com",
        "a.b-c@mail.example.cn",
        "@",
        "192.168.0.1",
        "2001:db8::1",
        "sk-abcdefghijklmnopqrstuvwx",
        "password: Xy7#kLm92pQ",
        "token=",
        "卡号",
        "邮箱",
        "京A12345",
        " ",
        "-",
        ".",
        ":",
        "9",
        "x",
        "Key",
        "订单20231128",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=12))
def test_fast_paths_find_what_the_plain_regexes_find(parts: list[str]) -> None:
    text = "".join(parts)
    assert FAST.analyze(text) == REFERENCE.analyze(text)


def test_cjk_adjacency() -> None:
    text = f"身份证{cn_id()}手机13800138000卡号{luhn_card('622202', 16)}邮箱a@b.cn"
    kinds = [s.entity_type for s in FAST.analyze(text)]
    assert kinds == ["CN_ID_CARD", "CN_MOBILE", "CN_BANK_CARD", "EMAIL_ADDRESS"]


def test_overlaps_prefer_score_then_length() -> None:
    spans = [
        Span(0, 10, "A", 0.5, "a"),
        Span(2, 8, "B", 0.9, "b"),
        Span(8, 20, "C", 0.9, "c"),
        Span(30, 40, "D", 0.3, "d"),
    ]
    kept = resolve_overlaps(spans, min_score=0.4)
    assert [s.entity_type for s in kept] == ["B", "C"]


def test_same_type_overlaps_merge() -> None:
    kept = resolve_overlaps([Span(0, 5, "P", 0.6, "x"), Span(3, 9, "P", 0.7, "y")])
    assert kept == [Span(0, 9, "P", 0.7, "y")]


def test_id_beats_bank_card_and_uscc_on_the_same_digits() -> None:
    value = cn_id("620102", "19900101", "123")  # Gansu IDs start with 62, like UnionPay
    spans = FAST.analyze(f"号码{value}")
    assert [s.entity_type for s in spans] == ["CN_ID_CARD"]


def test_custom_regex_and_word_list_from_config() -> None:
    analyzer = Analyzer.from_config(
        {
            "builtin": False,
            "custom": [
                {"type": "regex", "entity_type": "EMPLOYEE_ID", "pattern": "EMP-[0-9]{6}"},
                {"type": "words", "entity_type": "PROJECT", "words": ["Bluebird", "青鸟计划"]},
            ],
        }
    )
    text = "员工EMP-123456参与青鸟计划 and bluebird, not Bluebirds"
    got = [(s.entity_type, text[s.start : s.end]) for s in analyzer.analyze(text)]
    assert got == [("EMPLOYEE_ID", "EMP-123456"), ("PROJECT", "青鸟计划"), ("PROJECT", "bluebird")]


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "regex", "entity_type": "X", "pattern": "("},
        {"type": "regex", "pattern": "a"},
        {"type": "words", "entity_type": "X", "words": []},
        {"type": "regex", "entity_type": "X", "pattern": "a", "score": 2},
        {"type": "nope", "entity_type": "X"},
    ],
)
def test_bad_specs_are_rejected(spec: dict[str, object]) -> None:
    with pytest.raises(RecognizerSpecError):
        recognizer_from_spec(spec)


def test_entity_filter_and_min_score() -> None:
    analyzer = Analyzer(entities=["EMAIL_ADDRESS"])
    text = "a@b.cn 13800138000"
    assert [s.entity_type for s in analyzer.analyze(text)] == ["EMAIL_ADDRESS"]
    assert Analyzer(min_score=0.99).analyze(text) == []


def test_presidio_adapter_is_optional() -> None:
    # presidio_analyzer is not a dependency: the adapter reports it absent.
    assert presidio_available() is False
    assert maybe_presidio() is None
    assert Analyzer.from_config({"presidio": True}).analyze("x@y.cn")[0].entity_type == (
        "EMAIL_ADDRESS"
    )


def test_a_pattern_that_can_match_nothing_ends() -> None:
    """A custom pattern that matches the empty string (``q*``) finds its non-empty
    matches and stops at the end of the text (it used to loop there for ever)."""
    r = PatternRecognizer("q", "Q", re.compile("q*"), 0.5)
    assert [(s.start, s.end) for s in r.find("abqqc")] == [(2, 4)]
    assert r.find("") == []
