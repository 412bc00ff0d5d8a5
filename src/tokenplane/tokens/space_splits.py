"""Where a text's pre-tokens must break, for the pre-tokenizers read below: at a space
between two non-space characters, and between a newline and ``[``. There a text can be
cut and each part counted on its own, with the same total: the count of a text is the
sum of its words' counts (``tokens/word_counts.py``), and the count of a packed context
block the sum of its documents' counts and of a few short joins (``context/block_count.py``).

A byte-level BPE tokenizer of this kind (tiktoken's encodings, Hugging Face ``Split`` +
``ByteLevel`` pre-tokenizers) cuts the text into pieces, the leftmost-first matches of
a pattern (the gaps between matches, for an ``Isolated`` split, are pieces too), and
encodes each piece on its own. If every piece of ``a + b`` lies wholly in ``a`` or
wholly in ``b`` and the pieces of ``a`` alone and of ``b`` alone are those same pieces,
``count(a + b) == count(a) + count(b)``. The patterns (``PATTERNS``):

- cl100k_base (tiktoken before and since 0.8), o200k_base, Qwen (1 to 2.5, and its
  Hugging Face form), Qwen 3.5, Llama 3: ``'s|'t|...`` contractions, ``[^\\r\\n\\p{L}\\p{N}]?``
  + letters (o200k: cased letter runs + an optional contraction), digits (1 or up to 3),
  ``' ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*'`` (o200k: ``[\\r\\n/]*``), then whitespace-only
  alternatives (``\\s++$``, ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``, ``\\s+``);
- DeepSeek V3: ``Isolated`` splits by ``\\p{N}{1,3}``, then by runs of kana and
  ``一-龥``, then ``[!-/:-@[-`{-~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|
  ?[\\p{P}\\p{S}]+[\\r\\n]*`` and the same whitespace alternatives; a space is always
  matched (by ``\\s+`` at worst), so no gap holds one.

In every one of them a piece holding a non-whitespace character holds a space only as
its first character (the optional lead of a letter or punctuation piece), and a piece
holding a newline is whitespace only or ends a punctuation piece (``[\\r\\n]*``); no
alternative looks behind, and only whitespace alternatives look ahead (``(?!\\S)``,
``$``) or can run to the end of the text. So:

1. **A space at ``p`` with a non-space character on each side is a break.** No piece
   holds both ``text[p-1]`` (not whitespace) and the space after it. From ``p`` on the
   pieces are those of ``text[p:]`` alone (nothing looks behind). Before ``p``, the
   piece that ends at ``p - 1`` ends in a non-space character: a letter, digit or
   punctuation run stops at the space as it stops at the end of the text, and an
   optional ``[\\r\\n]*`` takes nothing from either; no whitespace piece can reach
   ``p - 1``, so none reads past it; so the pieces of ``text[:p]`` alone are the same.
   A space at the very start is a break trivially; one at the very end, after a
   non-space character, is a break by the same reading of ``text[:p]``, and is the piece
   `` `` either way.
2. **A newline followed by ``[`` is a break** (the joins ``"\\n\\n"`` of a context block
   before its markers ``[1]``...). No piece holds a newline and a non-whitespace
   character after it, and ``[`` starts the piece of ``text[q:]`` alone. Before ``q``:
   the text ends in a whitespace run ``W`` ending in a newline; a punctuation piece
   right before it takes the same newlines (``[\\r\\n]*`` stops at ``[`` as at the end);
   what is left of ``W`` starts no letter or punctuation piece (a space lead needs a
   letter or punctuation after it, and ``W`` holds neither), and is matched whole by
   ``\\s++$`` at the end and by ``\\s*[\\r\\n]`` (``\\s*[\\r\\n]+``) before ``[``: the same
   piece, so the same tokens.

"Non-space" is read through :func:`is_space` (Python's ``str.isspace``, U+180E too): a
superset of the patterns' ``\\s`` (Unicode White_Space, in Rust's ``regex`` and in
Oniguruma), so a character it calls non-space is non-space for the tokenizer too. A
tokenizer only claims these breaks when its pattern is one of ``PATTERNS`` (the
tests hold every pattern to both claims on random text against the real tokenizers),
and only for text holding no special-token text (special tokens are matched before
the pattern; the callers check).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

# tiktoken pattern strings (``Encoding._pat_str``) and Hugging Face ``Split`` regexes
_WS = r"\s*[\r\n]+|\s+(?!\S)|\s+"
CL100K = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"
          r"| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s")
CL100K_OLD = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
              r"| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS)
QWEN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS)
QWEN3_5 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
           r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|" + _WS)
O200K = "|".join((
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}", r" ?[^\s\p{L}\p{N}]+[\r\n/]*", _WS))
LLAMA3 = CL100K_OLD  # Llama 3's tokenizer.json carries cl100k's older pattern
DEEPSEEK_V3 = (
    r"\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)

PATTERNS: frozenset[str] = frozenset({CL100K, CL100K_OLD, QWEN, QWEN3_5, O200K})
# Hugging Face pre-tokenizers: the ``Isolated`` split regexes, in order
SPLIT_SEQUENCES: frozenset[tuple[str, ...]] = frozenset({
    (CL100K_OLD,), (QWEN,), (QWEN3_5,), (LLAMA3,), (O200K,), DEEPSEEK_V3,
})



class SplitCounting(Protocol):
    """A tokenizer whose pre-tokens break where the module doc says (its
    ``space_splits``): exact counts, and which texts hold special-token text (where
    the breaks are not claimed)."""

    def count(self, text: str) -> int: ...

    def ordinary(self, text: str) -> bool: ...


@runtime_checkable
class KnownCounts(Protocol):
    """Counts kept for texts worked out before (a segment cache)."""

    def known(self, text: str) -> int | None: ...

    def remember(self, text: str, count: int) -> None: ...


_ASCII = bytes(range(128))
# whitespace (Python's str.isspace on ASCII: \x1c-\x1f too) to " ", the rest to "x"; then
# with only the spaces as " " (other whitespace "\n"; non-ASCII whitespace is looked at
# apart)
_BLANKS = bytes(32 if c < 128 and chr(c).isspace() else 120 for c in range(256))
# whitespace to every tokenizer (Rust's and Oniguruma's \s, Python's) to " ", the rest "x"
_RUNS = bytes(32 if c in b" \t\n\x0b\x0c\r" else 120 for c in range(256))
_SPACES = bytes(32 if c == 32 else 10 if c < 128 and chr(c).isspace() else 120
                for c in range(256))


def is_space(c: str) -> bool:
    """Whitespace to some tokenizer (a superset of Unicode White_Space)."""
    return c.isspace() or c == "\u180e"


def _every_space_breaks(text: str) -> bool:
    """Whether no space of ``text`` touches another whitespace character (then every
    space is a break); False also for text that cannot be UTF-8 (lone surrogates)."""
    if text.isascii():
        b = text.encode("ascii")
    else:
        try:
            b = text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        if any(is_space(c) for c in set(b.translate(None, _ASCII).decode("utf-8"))):
            return False
    if b"  " not in b.translate(_BLANKS):  # no two whitespace characters in a row
        return True
    c = b.translate(_SPACES)
    return b"  " not in c and b" \n" not in c and b"\n " not in c


def words(text: str) -> list[str]:
    """``text`` cut at its spaces that are breaks: ``out[0]`` the text before the first
    one, each later item the text after a break's space (the space left out), so
    ``text == " ".join(out)`` and ``count(text) == count(out[0]) + sum(count(" " + w)
    for w in out[1:])`` for a tokenizer of ``PATTERNS`` on text with no special-token
    text."""
    parts = text.split(" ")
    if len(parts) == 1 or _every_space_breaks(text):
        return parts
    out = [parts[0]]
    last = len(parts) - 1
    for k in range(1, len(parts)):
        prev, cur = parts[k - 1], parts[k]
        before = not is_space(prev[-1]) if prev else k == 1  # (or the text's start)
        after = not is_space(cur[0]) if cur else k == last  # (or the text's end)
        if before and after:
            out.append(cur)
        else:
            out[-1] = out[-1] + " " + cur
    return out


def runs_floor(text: str) -> int:
    """The fewest tokens ``text`` can take: its runs of non-whitespace, each at least
    one token, since no piece of these patterns holds a non-space character, then
    whitespace, then a non-space character (a space only leads a piece, newlines only
    end a punctuation piece); special tokens hold no whitespace. Whitespace here is
    ASCII's `` \t\n\v\f\r`` only (whitespace to every tokenizer; taking other
    whitespace for text only joins runs), so one ``translate`` and one ``count``: about
    0.6-0.75 of the count on prose, at a tenth of the cost of the piece floor."""
    c = text.encode("utf-8", "surrogatepass").translate(_RUNS)
    return c.count(b" x") + c.startswith(b"x")


def _is_break(text: str, p: int) -> bool:
    return 0 < p < len(text) - 1 and not is_space(text[p - 1]) and not is_space(text[p + 1])


def first_break(text: str) -> int | None:
    """The first space of ``text`` with a non-space character on each side."""
    p = text.find(" ")
    while p >= 0 and not _is_break(text, p):
        p = text.find(" ", p + 1)
    return p if p >= 0 else None


def last_break(text: str) -> int | None:
    """The last space of ``text`` with a non-space character on each side."""
    p = text.rfind(" ")
    while p >= 0 and not _is_break(text, p):
        p = text.rfind(" ", 0, p)
    return p if p >= 0 else None


def _heads(contents: list[str]) -> frozenset[str]:
    return frozenset(c[:2] for c in contents if c)


def hf_heads(spec: Mapping[str, Any]) -> frozenset[str] | None:
    """For a Hugging Face ``tokenizer.json`` (parsed) whose breaks are those read above
    (a byte-level BPE model; no normalizer but NFC, which never joins across a space or
    a newline; ``Isolated`` splits by one of ``SPLIT_SEQUENCES`` then ``ByteLevel``
    without its own regex; added tokens that strip nothing and hold no ASCII
    whitespace nor ``[``), the first two characters of its added tokens (text holding
    none of them holds no added token); else None."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or model.get("dropout") or model.get("byte_fallback"):
        return None
    norm = spec.get("normalizer")
    norms: list[Any] = list(norm.get("normalizers") or []) if isinstance(norm, Mapping) \
        and norm.get("type") == "Sequence" else [norm] if norm else []
    if any(not isinstance(n, Mapping) or n.get("type") != "NFC" for n in norms):
        return None
    pre = spec.get("pre_tokenizer")
    found: list[Any] = list(pre.get("pretokenizers") or []) if isinstance(pre, Mapping) \
        and pre.get("type") == "Sequence" else [pre]
    steps: list[Mapping[str, Any]] = [s for s in found if isinstance(s, Mapping)]
    if not steps or len(steps) != len(found):
        return None
    *splits, last = steps
    if last.get("type") != "ByteLevel" or last.get("use_regex", True) or \
            last.get("add_prefix_space", True):
        return None
    regexes: list[str] = []
    for s in splits:
        pattern = s.get("pattern") or {}
        if s.get("type") != "Split" or s.get("behavior") != "Isolated" or s.get("invert") \
                or not isinstance(pattern.get("Regex"), str):
            return None
        regexes.append(pattern["Regex"])
    if tuple(regexes) not in SPLIT_SEQUENCES:
        return None
    added = spec.get("added_tokens") or []
    contents: list[str] = []
    for a in added:
        content = str(a.get("content", ""))
        if a.get("lstrip") or a.get("rstrip") or a.get("single_word") or \
                any(c in content for c in " \t\n\x0b\x0c\r["):
            return None
        contents.append(content)
    return _heads(contents)


def hf_heads_of(tokenizer_json: str) -> frozenset[str] | None:
    try:
        spec = json.loads(tokenizer_json)
    except ValueError:
        return None
    return hf_heads(spec) if isinstance(spec, Mapping) else None
