"""Token counts of ASCII text for tiktoken encodings, in Python, holding the GIL.

tiktoken's ``encode_ordinary`` releases the GIL for every call. On the gateway's event-loop
thread that costs a GIL hand-off to any waiting background thread (a journal writer, a
database worker) each time a short prompt segment is counted, which is several times the
cost of tokenizing it. For ASCII text this module counts the same tokens without releasing
the GIL: it splits the text with the encoding's own pre-tokenizer pattern, written for the
ASCII alphabet and run by Python's ``re``, and counts each piece as tiktoken does (one
token when the piece is in the vocabulary, else the byte-pair merge of
``CoreBPE.encode_single_piece``, which keeps the GIL), memoised per piece.

Why the counts are exact: tiktoken encodes ordinary text as the concatenation, over the
pattern's leftmost-first matches, of ``encode_single_piece(match)``. On ASCII input every
class of the original pattern has a fixed ASCII meaning (``\\p{L}`` = ``A-Za-z``,
``\\p{N}`` = ``0-9``, ``\\p{M}`` = nothing, ``\\s`` = ``[ \\t\\n\\v\\f\\r]``, ``$`` = end
of text, which is ``\\Z`` in Python); the translated patterns below are those meanings
spelled out. The possessive quantifiers of cl100k's pattern are written as plain ones:
each is followed by nothing or by a class disjoint from it, so backtracking into it can
never produce a match (the two forms match the same strings). Only patterns listed in
:data:`ASCII_PATTERNS` get a counter; anything else keeps tiktoken's own path. The tests
compare both ways of counting on many generated and random texts for every encoding.

Callers must ensure the text is ASCII and holds no special-token text (see
:class:`~tokenplane.tokens.registry.TiktokenTokenizer`).
"""

from __future__ import annotations

import re
from typing import Any

_S = r" \t\n\x0b\x0c\r"  # \s on ASCII: tab, newline, vertical tab, form feed, return, space

# tiktoken pattern -> the same pattern on the ASCII alphabet (see the module doc).
ASCII_PATTERNS: dict[str, str] = {
    # cl100k_base (tiktoken >= 0.8)
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
    r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s": (
        rf"'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{{1,3}}| ?[^{_S}A-Za-z0-9]+"
        rf"[\r\n]*|[{_S}]+\Z|[{_S}]*[\r\n]|[{_S}]+(?![^{_S}])|[{_S}]"
    ),
    # cl100k_base (tiktoken < 0.8)
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
    r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": (
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]{{1,3}}"
        rf"| ?[^{_S}A-Za-z0-9]+[\r\n]*|[{_S}]*[\r\n]+|[{_S}]+(?![^{_S}])|[{_S}]+"
    ),
    # Qwen (qwen-7b-chat ... qwen2.5)
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": (
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
        rf"| ?[^{_S}A-Za-z0-9]+[\r\n]*|[{_S}]*[\r\n]+|[{_S}]+(?![^{_S}])|[{_S}]+"
    ),
    # Qwen3.5 / 3.6 (marks join letters; there are no ASCII marks)
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": (
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\nA-Za-z0-9]?[A-Za-z]+|[0-9]"
        rf"| ?[^{_S}A-Za-z0-9]+[\r\n]*|[{_S}]*[\r\n]+|[{_S}]+(?![^{_S}])|[{_S}]+"
    ),
}

PIECE_MEMO_SIZE = 1 << 15


class AsciiBpe:
    """Counts the tokens of ASCII text (no special-token text) for one tiktoken encoding."""

    def __init__(self, pattern: str, core_bpe: Any, memo_size: int = PIECE_MEMO_SIZE) -> None:
        self._findall = re.compile(pattern).findall
        self._single_piece = core_bpe.encode_single_piece
        self._memo: dict[str, int] = {}
        self._memo_size = memo_size

    def count(self, text: str) -> int:
        pieces: list[str] = self._findall(text)
        try:
            n: int = sum(map(self._memo.get, pieces))  # type: ignore[arg-type]
            return n
        except TypeError:  # some piece not seen yet (None in the sum)
            pass
        memo = self._memo
        n = 0
        for p in pieces:
            c = memo.get(p)
            n += c if c is not None else self._piece(p)
        return n

    def _piece(self, piece: str) -> int:
        n = len(self._single_piece(piece.encode("ascii")))
        memo = self._memo
        if len(memo) >= self._memo_size:
            memo.clear()  # bounded: start over rather than track recency per piece
        memo[piece] = n
        return n


def ascii_bpe(encoding: Any) -> AsciiBpe | None:
    """The ASCII counter of a ``tiktoken.Encoding``, or None when its pattern is not known."""
    pattern = ASCII_PATTERNS.get(getattr(encoding, "_pat_str", None) or "")
    core = getattr(encoding, "_core_bpe", None)
    if pattern is None or core is None or not hasattr(core, "encode_single_piece"):
        return None
    return AsciiBpe(pattern, core)
