"""A floor under a text's token count from its pre-token pieces' shape, without
tokenizing: for the tiktoken patterns of :data:`~tokenplane.tokens.ascii_bpe.ASCII_PATTERNS`
(cl100k_base, Qwen, Qwen3.5), on text holding no special-token text.

Such a tokenizer encodes the text piece by piece (the pattern's leftmost-first matches),
each piece at least one token. Classify every character as a letter (``\\p{L}``, and
``\\p{M}`` where the pattern joins marks to letters), a digit (``\\p{N}``), whitespace
(``\\s``) or other. Reading the pattern's alternatives:

- a piece holding letters holds one run of them, at most preceded by one non-letter,
  non-digit character (the ``[^\\r\\n\\p{L}\\p{N}]?`` lead, or the apostrophe of a
  contraction) and nothing else: so each maximal run of letters needs a piece of its own;
- a piece holding digits holds only digits (at most 3 for cl100k, 1 for Qwen);
- a piece holding other characters and no letter is ``' ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*'``,
  whose greedy run takes a whole maximal run of other characters; the only other
  characters a letter piece takes are single ones right before a letter (the lead).
  So each maximal run of other characters, less those of one character just before a
  letter, needs a piece of its own, holding no letter or digit.

These pieces are distinct, so the text takes at least (letter runs) + (digit pieces) +
(other runs not a letter's lead) tokens, about 0.8 of the count for English prose. Non-
ASCII characters are classified with ``unicodedata`` (Python's table can be older than
the tokenizer's: a character unassigned in it gives no floor), then the text is read as
ASCII bytes: one ``bytes.translate`` to classes, then the runs found with numpy (no
per-character Python; about 1/5 of the cost of counting).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from tokenplane.tokens import word_kernels
from tokenplane.tokens.ascii_bpe import ASCII_PATTERNS
from tokenplane.tokens.word_kernels import piece_runs

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@dataclass(slots=True)
class PieceFloor:
    """``digits_per_piece``: 3 (cl100k's ``\\p{N}{1,3}``) or 1 (Qwen's ``\\p{N}``);
    ``marks_are_letters``: Qwen3.5's ``[\\p{L}\\p{M}]+``; ``nfc``: the tokenizer
    normalizes to NFC first."""

    digits_per_piece: int
    marks_are_letters: bool = False
    nfc: bool = False
    _seen: dict[str, str] = field(default_factory=dict, repr=False)

    def _class(self, c: str) -> str:
        found = self._seen.get(c)
        if found is None:
            cat = unicodedata.category(c)
            if cat == "Cn":
                found = ""  # unassigned here: the tokenizer may know it
            elif cat[0] == "L" or (cat[0] == "M" and self.marks_are_letters):
                found = "a"
            elif cat[0] == "N":
                found = "0"
            elif c.isspace():
                found = " "
            else:
                found = "!"
            if len(self._seen) < 65536:
                self._seen[c] = found
        return found

    def tokens(self, text: str, above: int = -1) -> int:
        """The fewest tokens ``text`` can take (0 when none is known). ``above``: where
        only whether it is over ``above`` matters, ASCII text's count may stop as soon as
        it is (``word_kernels.piece_runs``: a floor too)."""
        if not text.isascii():
            if self.nfc:
                text = unicodedata.normalize("NFC", text)
            if word_kernels.COMPILED:  # the classes of the non-ASCII characters read in C
                if "\x00" in text:
                    return 0  # (as below: "\x00" stands for a character of no class)
                while len(self._seen) < 65536:
                    got = word_kernels.seen_piece_runs(text, self._seen,
                                                       self.digits_per_piece == 1)
                    if isinstance(got, int):
                        return got
                    self._class(got)  # (kept in _seen, while it has room)
            text = _NON_ASCII.sub(lambda m: self._class(m.group()) or "\x00", text)
            if "\x00" in text:
                return 0
            return piece_runs(text, self.digits_per_piece == 1)  # (tokens/word_kernels.py)
        return piece_runs(text, self.digits_per_piece == 1, above)


def piece_floor(pattern: str | None, nfc: bool = False) -> PieceFloor | None:
    """The floor for a tiktoken pattern of ``ASCII_PATTERNS`` (None for others)."""
    if pattern is None or pattern not in ASCII_PATTERNS:
        return None
    digits = 3 if r"\p{N}{1,3}" in pattern else 1
    return PieceFloor(digits, r"[\p{L}\p{M}]+" in pattern, nfc)
