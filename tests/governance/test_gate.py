"""The analyzer's gates skip recognizers only for texts in which they find nothing:
the gated analysis equals the full one on every corpus text and on generated ones."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.analyzer_cache import CachedAnalyzer
from tokenplane.governance.gate import Gate, TextGate, alternative, ascii_part, first_chars
from tokenplane.governance.pattern import PatternRecognizer, compile_pattern

from .corpus import EDGES, PII, PROSE, texts

ANALYZER = Analyzer()
GATES = [getattr(r, "gate", None) for r in ANALYZER.recognizers]
JOINED = TextGate.of(GATES)
CUSTOM = Analyzer.from_config({"custom": [
    {"type": "regex", "entity_type": "EMPLOYEE_ID", "pattern": "EMP-[0-9]{6}"},
    {"type": "words", "entity_type": "PROJECT", "words": ["Bluebird", "青鸟计划", "Hello"]},
    {"type": "regex", "entity_type": "REPEAT", "pattern": r"(\w)\1{5}"},  # back-reference
    {"type": "regex", "entity_type": "NAMED", "pattern": r"(?P<value>zz[0-9]+)"},  # name clash
    {"type": "regex", "entity_type": "GLOBAL", "pattern": r"(?i)order-[0-9]{4}"},
    {"type": "regex", "entity_type": "FREE", "pattern": r"[^\s,]{2}QQ\d"},  # first chars: any
]})


def _check(text: str) -> None:
    assert ANALYZER.analyze(text) == ANALYZER.analyze_full(text)
    assert CUSTOM.analyze(text) == CUSTOM.analyze_full(text)
    clear = JOINED.clear(text)
    assert ANALYZER.nothing_in(text) == clear
    for r, gate, on in zip(ANALYZER.recognizers, GATES, JOINED.gated, strict=True):
        if not r.find(text):
            continue
        assert not (on and clear), r.name
        assert isinstance(gate, Gate)
        assert len(re.sub(r"\D+", "", text)) >= gate.digits, r.name
        if gate.lowered and len(text.lower()) != len(text):
            continue
        assert gate.pattern.search(text.lower() if gate.lowered else text), r.name


def test_every_builtin_recognizer_has_a_gate() -> None:
    assert JOINED.covers_all
    assert JOINED.ascii and JOINED.ascii_lowered


def test_custom_recognizers_without_a_usable_gate_always_run() -> None:
    names = [r.name for r in CUSTOM.recognizers]
    gated = dict(zip(names, TextGate.of([getattr(r, "gate", None)
                                         for r in CUSTOM.recognizers]).gated, strict=True))
    assert gated["employee_id"] and gated["project"] and gated["free"]
    assert not gated["repeat"] and not gated["named"] and not gated["global"]
    text = "aaaaaa zz12 ORDER-1234 emp-123456 EMP-123456 hello Bluebird abQQ1"
    found = {s.entity_type for s in CUSTOM.analyze(text)}
    assert found == {"REPEAT", "NAMED", "GLOBAL", "EMPLOYEE_ID", "PROJECT", "FREE"}


def test_corpus_gated_equals_full() -> None:
    for text in texts():
        _check(text)


def test_prose_is_cleared_and_pii_is_not() -> None:
    for text in PROSE[:8]:
        assert ANALYZER.nothing_in(text), text
    found = [value for value in PII if ANALYZER.analyze(value)]
    assert len(found) > len(PII) - 3
    for value in found:
        assert not ANALYZER.nothing_in(value), value


def test_case_edges() -> None:
    kelvin = "\u212aey=Abcdefgh123xyz"  # lower() gives "key=abcdefgh123xyz": a secret
    assert [s.entity_type for s in ANALYZER.analyze(kelvin)] == ["SECRET"]
    longer = "\u0130 password: Xy7#kLm92pQ"
    assert not JOINED.clear(longer)  # lower() changes its length: no proof
    assert ANALYZER.analyze(longer) == ANALYZER.analyze_full(longer)


pieces = st.sampled_from([*PII, *EDGES, *PROSE, "Key", "TOKEN", "is", "：", "=", "\u212a"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces | st.text(max_size=12), min_size=1, max_size=8))
def test_generated_gated_equals_full(parts: list[str]) -> None:
    _check("".join(parts))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60))
def test_generated_ascii_gated_equals_full(text: str) -> None:
    _check(text)


def _gate_patterns() -> list[re.Pattern[str]]:
    out = [g.pattern for g in GATES if g is not None]
    out += [compile_pattern(p, re.IGNORECASE) for p in (r"key|tok[e3]n", r"[a-f]{2}\d", "Z")]
    return out


def test_first_chars_hold_every_match_start() -> None:
    samples = [*PROSE, *PII, *EDGES, "Key=abcdefgh1", "kEy", "FF1", "z", "ZZ"]
    for pattern in _gate_patterns():
        first = first_chars(pattern)
        if first is None:
            continue
        cls = re.compile(first)
        for text in samples:
            for p in range(len(text)):
                if pattern.match(text, p) is not None:
                    assert cls.match(text, p), (pattern.pattern, text, p)


def test_first_chars_examples() -> None:
    assert first_chars(re.compile("a?b")) is not None
    assert first_chars(re.compile("a*")) is None  # matches an empty string
    assert first_chars(re.compile("[^a]b")) is None  # too wide to list
    assert first_chars(re.compile("(?i:k)", re.UNICODE)) is None  # K, k and the Kelvin sign
    ci = first_chars(re.compile("k", re.ASCII | re.IGNORECASE))
    assert ci is not None and re.match(ci, "K") and re.match(ci, "k")
    assert not re.match(ci, "\u212a")


def test_alternative_refuses_what_cannot_join_others() -> None:
    assert alternative(re.compile(r"(a)\1")) is None
    assert alternative(re.compile(r"(?i)abc")) is None  # a global flag inside a group
    assert alternative(re.compile("abc", re.IGNORECASE)) == "(?i:abc)"
    verbose = re.compile("a  # a comment", re.VERBOSE)
    source = alternative(verbose)
    assert source is not None and re.compile(source + "|zz").search("a")


def test_ascii_part_keeps_what_an_ascii_text_can_hold() -> None:
    assert ascii_part(r"[\U00000041-\U0000005a\U00004eac\d]") == r"[\U00000041-\U0000005a\d]"
    assert ascii_part(r"[\U00000070-\U00004eac]") == r"[\U00000070-\U0000007f]"
    assert ascii_part(r"[\U00004eac\U00004eb0-\U00004ec0]") is None
    plate = next(r for r in ANALYZER.recognizers if r.name == "cn_license_plate")
    assert isinstance(plate, PatternRecognizer)
    province = first_chars(plate.pattern)  # starts with a province's character
    assert province is not None and ascii_part(province) is None


def test_subclass_with_its_own_find_gets_no_gate() -> None:
    class Odd(PatternRecognizer):
        def find(self, text: str) -> list:  # type: ignore[type-arg]
            return []

    odd = Odd("odd", "ODD", compile_pattern("x"), 0.9)
    assert odd.gate is None
    assert TextGate.of([odd.gate]).gated == (False,)


def test_cached_analyzer_agrees_and_remembers() -> None:
    cached = CachedAnalyzer(Analyzer(), max_entries=64, max_clean=16)
    corpus = texts()
    for text in corpus + corpus[:50]:
        spans = cached.analyze(text)
        assert spans == ANALYZER.analyze_full(text)
        assert cached.nothing_in(text) == (not spans) or len(text) < cached.min_len
        if cached.nothing_in(text):
            assert not spans
    assert cached.hits > 0 and len(cached._cache) <= 64 and len(cached._clean) <= 16
    fresh = CachedAnalyzer(Analyzer(), max_entries=64, max_clean=16)
    for text in corpus + [t + " " for t in corpus[:80]] + corpus[:80]:
        nothing = fresh.nothing_in(text)  # first, as the input guard asks
        spans = fresh.analyze(text)
        assert spans == ANALYZER.analyze_full(text)
        assert not (nothing and spans)
        # once scanned, a long text is known either way
        assert fresh.nothing_in(text) == (not spans) or len(text) < fresh.min_len
