"""A recognizer is skipped only for texts it cannot match: every match contains a
character of its required set."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.analyzer import Analyzer, builtin_recognizers
from tokenplane.governance.prechecks import Need, min_digits, required_need

from .factories import cn_id, luhn_card


def test_required_need_examples() -> None:
    assert required_need(re.compile(r"[0-9]{3}-x")) == Need(True, frozenset())
    assert required_need(re.compile(r"\w+@\w+")) == Need(False, frozenset("@"))
    assert required_need(re.compile(r"(?:\+|\(0)[a-z]+")) == Need(False, frozenset("+("))
    assert required_need(re.compile(r"a?b*")) is None  # nothing is required
    assert required_need(re.compile(r"[^0-9]x")) == Need(False, frozenset("x"))
    assert required_need(re.compile(r"x|[0-9]")) == Need(True, frozenset("x"))
    # case-insensitive: letters could match in another case, so they are not required
    assert required_need(re.compile(r"key", re.IGNORECASE)) is None
    assert required_need(re.compile(r"key"), lowered=True) is None
    assert required_need(re.compile(r"(?i:key)\d")) == Need(True, frozenset())




def test_min_digits_examples() -> None:
    assert min_digits(re.compile(r"[1-8][0-9]{16}[0-9Xx]")) == 17
    assert min_digits(re.compile(r"(?:\+|00)86[ -]?1[3-9]\d(?:[ -]?[0-9]{4}){2}")) == 13
    assert min_digits(re.compile(r"a\d|bc")) == 0  # one alternative has none
    assert min_digits(re.compile(r"(?=\d{5})x\d?")) == 0  # look-aheads consume nothing


pieces = st.sampled_from([
    cn_id(), "13800138000", "+86 139 1234 5678", luhn_card("622202", 19),
    "4111 1111 1111 1111", "john@example.com", "192.168.0.1", "2001:db8::1",
    "sk-abcdefghijklmnopqrstuvwx", "ghp_" + "a1" * 18, "AKIAABCDEFGHIJKLMNOP",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghij", "password: Xy7#kLm92pQ",
    "京A12345", "（010）6552 9988", "(020) 8888-6666", "GB82WEST12345698765432",
    "E12345678", "91350100M000100Y43", "٣٤٥", "１２３", " ", "-", ".", ":", "x", "Say hello.",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces | st.text(max_size=8), min_size=1, max_size=10))
def test_skipped_recognizers_would_have_found_nothing(parts: list[str]) -> None:
    text = "".join(parts)
    for r in builtin_recognizers():
        need = getattr(r, "need", None)
        if isinstance(need, Need) and r.find(text):
            assert need.regex().search(text) is not None, r.name
        if r.find(text):
            assert len(re.sub(r"\D+", "", text)) >= getattr(r, "min_digits", 0), r.name


@settings(max_examples=200, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=10))
def test_analyzer_with_prechecks_finds_what_every_recognizer_finds(parts: list[str]) -> None:
    text = "".join(parts)
    analyzer = Analyzer()
    plain = Analyzer()
    plain._planned = lambda: [(r, -1, 0) for r in plain.recognizers]  # type: ignore[method-assign]
    assert analyzer.analyze(text) == plain.analyze(text)
