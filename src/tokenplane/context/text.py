"""Text units for ranking and near-duplicate detection, and sentence boundaries.

A *unit* is a lower-cased word in space-delimited scripts (Latin, Cyrillic, Greek,
Hangul, ...) and one character in Chinese and Japanese, which put no spaces between
words: a Chinese character is close to a morpheme, so character units (and their
bigrams for ranking, as Lucene's CJK analyzer does) stand in for words without a
segmenter's dictionary.
"""

from __future__ import annotations

import re

from tokenplane.context import unit_kernels

# Han (with extensions A and the compatibility block), kana; Hangul is space-delimited
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
UNIT_RE = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")
_CJK_RE = re.compile(f"[{_CJK}]")

# a sentence ends with . ! ? ; … (and their full-width forms), closing quotes or
# brackets may follow; Latin ends need whitespace after them, CJK ends do not
_SENTENCE_END = re.compile(
    r"(?:[.!?…]+[\"'”’)\]]*(?=\s)|[。！？；…]+[」』”’）)\]]*)\s*"
)


# ASCII bytes lower-cased, punctuation and str.split's whitespace to spaces (one
# ``bytes.translate``; the control characters stay, as they always have)
_ASCII_UNITS = bytes(
    (32 if chr(c) in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" or chr(c).isspace()
     else ord(chr(c).lower())) if c < 128 else c for c in range(256))


# for other text, lower-cased first: ASCII bytes that are not letters or digits to
# spaces, the bytes of other characters kept (UTF-8 never uses ASCII bytes for them)
_UTF8_UNITS = bytes(c if c >= 128 or chr(c).isalnum() else 32 for c in range(256))
_ASCII = bytes(range(128))


def unit_bytes(text: str) -> bytes | None:
    """The text's units as UTF-8 separated by spaces (`` `` only):
    ``units(text) == unit_bytes(text).decode().split(" ")`` less its empty strings;
    None for text holding a Chinese or Japanese character (whose units are single
    characters)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_UNITS)
    if unit_kernels.COMPILED:  # the same, in one pass of C (context/unit_kernels.py)
        return unit_kernels.non_ascii_unit_bytes(text)
    return unit_bytes_py(text)


def unit_bytes_py(text: str) -> bytes | None:
    """:func:`unit_bytes` in Python (its definition)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_UNITS)
    low = text.lower()
    data = low.encode("utf-8", "surrogatepass")
    others = set(data.translate(None, _ASCII).decode("utf-8", "surrogatepass"))
    if _CJK_RE.search("".join(others)) is not None:
        return None
    for c in others:
        if not c.isalnum():
            data = data.replace(c.encode("utf-8", "surrogatepass"), b" ")
    return data.translate(_UTF8_UNITS)


def units(text: str) -> list[str]:
    """The text's units in order (see module doc): ``UNIT_RE``'s matches in the
    lower-cased text. Text with no Chinese or Japanese character takes a fast path
    with the same result (``unit_bytes``: lower case and punctuation to spaces in one
    ``bytes.translate``, then ``str.split``: 20-50 times faster than the regular
    expression): a unit is a run of characters ``str.isalnum`` (the expression's
    ``[^\\W_]``), so each other character is a space, and the few distinct non-ASCII
    ones are looked at one by one. (For ASCII text the ASCII control characters stay
    in their unit, as they always have.)"""
    data = unit_bytes(text)
    if data is None:
        return UNIT_RE.findall(text.lower())
    return data.decode("utf-8", "surrogatepass").split()


def is_cjk(unit: str) -> bool:
    return len(unit) == 1 and _CJK_RE.match(unit) is not None


def sentence_ends(text: str) -> list[int]:
    """Offsets just past each sentence end (trailing whitespace included), ascending;
    the text's end is not included unless a sentence ends there."""
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def first_sentence_end(text: str) -> int | None:
    """``sentence_ends(text)[0]`` (None when there is none), without finding the rest."""
    m = _SENTENCE_END.search(text)
    return m.end() if m is not None else None
