"""Undo the tricks that hide instructions: invisible characters, look-alikes, encodings."""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass, field
from types import MappingProxyType

ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u00ad")
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
TAG_FIRST, TAG_LAST = 0xE0000, 0xE007F

# Cyrillic and Greek letters that look like Latin ones (lower case after casefold).
CONFUSABLES = MappingProxyType(str.maketrans(
    {
        "а": "a", "в": "b", "с": "c", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i",
        "ј": "j", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "ѕ": "s", "т": "t",
        "у": "y", "х": "x", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ɡ": "g",
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ϲ": "c", "ω": "w",
    }
))  # fmt: skip

_TAG_RE = re.compile(f"[{chr(TAG_FIRST)}-{chr(TAG_LAST)}]")
_ZERO_WIDTH_RE = re.compile("[" + "".join(sorted(ZERO_WIDTH)) + "]")
_BIDI_RE = re.compile("[" + "".join(sorted(BIDI_CONTROLS)) + "]")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
# where a run of base64 characters at least as long starts (the regex above would try
# every position inside every word)
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{24}")
_SPACED_RE = re.compile(r"\b(?:[a-z] ){4,}[a-z]\b")
_SPACED_HINT = re.compile(" [a-z] [a-z] ")  # every match of _SPACED_RE holds one
# in lower-cased ASCII: letters spelled out one by one, or a base64 run (one search)
_ASCII_WORK = re.compile(r" [a-z] [a-z] |(?<![a-z0-9+/])[a-z0-9+/]{24}")
_WS_RE = re.compile(r"\s+")
_GREEK_CYRILLIC = "\u0370-\u03ff\u0400-\u04ff"
_MIXED_SCRIPT_RE = re.compile(f"[a-z][{_GREEK_CYRILLIC}]|[{_GREEK_CYRILLIC}][a-z]")


@dataclass
class Normalized:
    """The text as a reader would see it, plus what was hidden in it."""

    text: str
    hidden: list[str] = field(default_factory=list)  # tag-character payloads
    decoded: list[str] = field(default_factory=list)  # base64 blobs that decode to text
    signals: list[str] = field(default_factory=list)  # invisible_unicode, bidi, homoglyph


def _decode_tags(text: str) -> tuple[str, str]:
    visible: list[str] = []
    hidden: list[str] = []
    for ch in text:
        cp = ord(ch)
        if TAG_FIRST <= cp <= TAG_LAST:
            if 0x20 <= cp - TAG_FIRST <= 0x7E:
                hidden.append(chr(cp - TAG_FIRST))
        else:
            visible.append(ch)
    return "".join(visible), "".join(hidden)


def _decoded_blobs(text: str) -> list[str]:
    out: list[str] = []
    if _BASE64_RUN.search(text) is None:
        return out
    for m in _BASE64_RE.finditer(text):
        blob = m.group(0)
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True)
            decoded = raw.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        printable = sum(1 for c in decoded if c.isprintable() or c.isspace())
        wordy = " " in decoded.strip() or any("\u4e00" <= c <= "\u9fff" for c in decoded)
        if decoded and printable / len(decoded) > 0.95 and wordy:
            out.append(decoded)
    return out


def plain_ascii(text: str) -> str | None:
    """``normalize(text).text`` when that is just ``text.lower()`` and nothing is
    hidden, decoded or signalled (ASCII prose: no base64 run, no spelled-out letters,
    single spaces); None otherwise (then call :func:`normalize`)."""
    if not text.isascii():
        return None
    folded = text.lower()
    # ASCII whitespace other than " " is unprintable; a base64 run stays one lower-cased
    if "  " in folded or not folded.isprintable() or _ASCII_WORK.search(folded) is not None:
        return None
    return folded


def normalize(text: str) -> Normalized:
    """NFKC, invisible characters removed (tag characters decoded), confusables
    mapped to Latin, case folded, whitespace collapsed; base64 blobs decoded."""
    result = Normalized(text="")
    if text.isascii():  # nothing invisible, no look-alikes; NFKC is the identity
        result.decoded = [_fold(d) for d in _decoded_blobs(text)]
        folded = text.lower()  # casefold() for ASCII
        spaced = _unspace(folded)
        # ASCII whitespace other than " " is unprintable: with none, and no two spaces
        # in a row, every run of whitespace is one space already
        plain = spaced.isprintable() and "  " not in spaced
        result.text = spaced if plain else _WS_RE.sub(" ", spaced)
        return result
    if _TAG_RE.search(text):
        text, hidden = _decode_tags(text)
        result.signals.append("invisible_unicode")
        if hidden:
            result.hidden.append(hidden.casefold())
    if _ZERO_WIDTH_RE.search(text):
        result.signals.append("invisible_unicode")
        # Also read it with the invisible characters as word breaks ("ignore<ZWSP>all").
        result.hidden.append(_fold(_ZERO_WIDTH_RE.sub(" ", text)))
        text = _ZERO_WIDTH_RE.sub("", text)
    if _BIDI_RE.search(text):
        result.signals.append("bidi_control")
        text = _BIDI_RE.sub("", text)
    result.decoded = [_fold(d) for d in _decoded_blobs(text)]
    folded = unicodedata.normalize("NFKC", text).casefold()
    mapped = folded.translate(CONFUSABLES)
    if mapped != folded and _MIXED_SCRIPT_RE.search(folded):
        result.signals.append("homoglyph")
    mapped = _unspace(mapped)
    result.text = _WS_RE.sub(" ", mapped)
    return result


def _unspace(text: str) -> str:
    """Letters spelled out one by one ("i g n o r e") joined into the word."""
    if _SPACED_HINT.search(text) is None:
        return text
    return _SPACED_RE.sub(lambda m: m.group(0).replace(" ", ""), text)


def _fold(text: str) -> str:
    return _WS_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold().translate(CONFUSABLES))
