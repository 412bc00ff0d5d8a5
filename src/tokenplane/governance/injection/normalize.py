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
_SPACED_RE = re.compile(r"\b(?:[a-z] ){4,}[a-z]\b")
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


def normalize(text: str) -> Normalized:
    """NFKC, invisible characters removed (tag characters decoded), confusables
    mapped to Latin, case folded, whitespace collapsed; base64 blobs decoded."""
    result = Normalized(text="")
    if text.isascii():  # nothing invisible, no look-alikes; NFKC is the identity
        result.decoded = [_fold(d) for d in _decoded_blobs(text)]
        folded = text.lower()  # casefold() for ASCII
        spaced = _SPACED_RE.sub(lambda m: m.group(0).replace(" ", ""), folded)
        result.text = _WS_RE.sub(" ", spaced)
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
    mapped = _SPACED_RE.sub(lambda m: m.group(0).replace(" ", ""), mapped)
    result.text = _WS_RE.sub(" ", mapped)
    return result


def _fold(text: str) -> str:
    return _WS_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold().translate(CONFUSABLES))
