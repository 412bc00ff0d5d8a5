"""Exact token counts of text from its words' counts, memoised per word.

For the pre-tokenizers of ``tokens/space_splits.py`` a space between two non-space
characters is a break: a text's count is the sum of the counts of its words (``words``:
the text before the first break, then each break's space with what follows, up to the
next break). Words recur across texts far more than texts do (a new retrieved chunk is
mostly words seen before), so with each word's count memoised a new text costs a
``str.split`` and a dictionary look-up per word: 3-5 times less than tokenizing it.

The memo holds only words that make their own breaks: a later word (kept without its
space) that is not empty, holds no space and neither starts nor ends with whitespace,
a first word that does not end with whitespace, and apart, a last word that may (a
text ending in a newline: it is looked up only last). So when every piece of
``text.split(" ")`` is found, every space of the text has a non-space character on each
side (or the text's start before it): the pieces are the text's words, and the sum is
exact with no further look at the text. Anything else (a new word, a space next to
other whitespace) takes the careful path: ``space_splits.words``, the new words counted
by the tokenizer (``count_many``: all of them in one call), or, for a text with many
new words, the whole text tokenized (``ids``) and its words' counts read off the token
ids (each token's length in bytes: the tokens end at every break, as every break ends a
piece); the text's count is then the number of ids, whatever the memo holds. Words
longer than ``MAX_WORD`` characters (a run of text with no break, such as Chinese) are
counted, not kept. The memo is bounded (``max_words``; it starts over when full) and
safe to share between threads (a look-up that finds a word gone counts it again).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from tokenplane.tokens.space_splits import is_space, words
from tokenplane.tokens.word_kernels import later_sum

MAX_WORD = 256
MAX_WORDS = 1 << 15
# a text with more new words than this (and than 1/8 of its words) is tokenized whole
FEW_NEW = 8

CountMany = Callable[[Sequence[str]], list[int]]
Ids = Callable[[str], list[int]]


def _later_word(w: str) -> bool:
    """Whether ``w`` may be kept as a later word (see the module doc)."""
    return bool(w) and len(w) <= MAX_WORD and " " not in w and not is_space(w[0]) \
        and not is_space(w[-1])


def _first_word(w: str) -> bool:
    return len(w) <= MAX_WORD and " " not in w and not (w and is_space(w[-1]))


def _last_word(w: str) -> bool:
    """A later word that ends with whitespace: the text's last (the break before it
    still holds)."""
    return bool(w) and len(w) <= MAX_WORD and " " not in w and not is_space(w[0]) \
        and is_space(w[-1])


class WordCounts:
    """``count_many``: the tokenizer's exact counts of texts (with no special-token
    text); ``ids`` and ``token_bytes`` (a token's length in UTF-8 bytes, by id): the
    whole-text path, None to count new words only."""

    __slots__ = ("_count_many", "_first", "_ids", "_last", "_lengths", "_rest",
                 "_token_bytes", "max_words")

    def __init__(self, count_many: CountMany, ids: Ids | None = None,
                 token_bytes: Callable[[], npt.NDArray[np.int64]] | None = None,
                 max_words: int = MAX_WORDS) -> None:
        self._count_many = count_many
        self._ids = ids
        self._token_bytes = token_bytes
        self._lengths: npt.NDArray[np.int64] | None = None
        self._first: dict[str, int] = {}  # a text's first word -> its count
        self._rest: dict[str, int] = {}  # w -> count(" " + w), for the later words
        self._last: dict[str, int] = {}  # the same, for last words ending in whitespace
        self.max_words = max_words

    def clear(self) -> None:
        """Forgets every word (for measuring the cost of new words)."""
        self._first.clear()
        self._rest.clear()
        self._last.clear()

    def _known(self, text: str) -> int | None:
        """The count from the memo alone, when it holds every piece (see module doc)."""
        first = self._first.get(text.partition(" ")[0])
        if first is None:
            return None
        n = later_sum(text, self._rest, self._last)
        return None if n is None else first + n

    def count(self, text: str) -> int:
        """The exact count of ``text`` (a text of ``space_splits.PATTERNS``' kind: no
        special-token text; already normalized where the tokenizer normalizes)."""
        n = later_sum(text, self._rest, self._last)
        if n is not None:
            head = text.partition(" ")[0]
            first = self._first.get(head)
            if first is not None:
                return first + n
            if _first_word(head):  # the pieces are the words: only the first is new
                return self._count_head(head) + n
        return self._count_new(text, words(text))

    def _count_head(self, head: str) -> int:
        """A text's first word counted (and kept), as ``_count_new`` counts it when the
        later words are all known."""
        n = self._count_many([head])[0]
        self._keep([], [], [head], [n])
        return n

    def count_many(self, texts: Sequence[str], others: Sequence[str] = ()) -> list[int]:
        """``[self.count(t) for t in texts]`` and then ``count_many(others)``'s counts,
        with one ``count_many`` call for all the new words and the ``others``."""
        out: list[int | None] = [self._known(t) for t in texts]
        todo = [i for i, n in enumerate(out) if n is None]
        split = [words(texts[i]) for i in todo]
        heads = dict.fromkeys(ws[0] for ws in split)
        later = dict.fromkeys(w for ws in split for w in ws[1:])
        known_heads = dict(zip(heads, map(self._first.get, heads), strict=True))
        known = dict(zip(later, map(self._rest.get, later), strict=True))
        new_heads = [w for w, n in known_heads.items() if n is None]
        new = [w for w, n in known.items() if n is None]
        batch = [" " + w for w in new] + new_heads + list(others)
        counts = self._count_many(batch) if batch else []
        a, b = len(new), len(new) + len(new_heads)
        known.update(zip(new, counts[:a], strict=True))
        known_heads.update(zip(new_heads, counts[a:b], strict=True))
        self._keep(new, counts[:a], new_heads, counts[a:b])
        for i, ws in zip(todo, split, strict=True):
            out[i] = (known_heads[ws[0]] or 0) + sum(
                map(known.__getitem__, ws[1:]))  # type: ignore[arg-type]
        return [n or 0 for n in out] + counts[b:]

    def _count_new(self, text: str, ws: list[str]) -> int:
        later = ws[1:]
        known = dict(zip(later, map(self._rest.get, later), strict=True))
        new = [w for w, n in known.items() if n is None]
        head = self._first.get(ws[0])
        if len(new) > FEW_NEW and len(new) * 8 > len(ws) and self._ids is not None:
            return self._whole(text, ws)
        texts = [" " + w for w in new]
        if head is None:
            texts.append(ws[0])
        counts = self._count_many(texts) if texts else []
        heads: list[str] = []
        if head is None:
            head = counts.pop()
            heads.append(ws[0])
        known.update(zip(new, counts, strict=True))
        self._keep(new, counts, heads, [head] if heads else [])
        return head + sum(map(known.__getitem__, later))  # type: ignore[arg-type]

    def _whole(self, text: str, ws: list[str]) -> int:
        """Tokenizes ``text`` whole; its words' counts go to the memo when the tokens'
        ends fall on the words' ends, as they must."""
        assert self._ids is not None and self._token_bytes is not None
        ids = self._ids(text)
        try:
            sizes = list(map(len, ws)) if text.isascii() else [
                len(w.encode("utf-8")) for w in ws]
        except UnicodeEncodeError:
            return len(ids)
        if self._lengths is None:
            self._lengths = self._token_bytes()
        ends = np.zeros(len(ids) + 1, np.int64)  # where each token ends, in bytes
        np.cumsum(self._lengths[np.asarray(ids, np.int64)], out=ends[1:])
        bounds = np.cumsum(np.asarray(sizes, np.int64) + 1) - 1  # where each word ends
        at = np.searchsorted(ends, bounds, side="right") - 1  # tokens up to each end
        if not np.array_equal(ends[at], bounds):
            return len(ids)  # (never, for the patterns of space_splits.PATTERNS)
        per = np.diff(at, prepend=0).tolist()
        self._keep(ws[1:], per[1:], ws[:1], per[:1])
        return len(ids)

    def _keep(self, later: list[str], counts: list[int], heads: list[str],
              head_counts: list[int]) -> None:
        """Keeps the counts of the words the memo may hold (see the module doc)."""
        self._store(self._rest, [(w, n) for w, n in zip(later, counts, strict=True)
                                 if _later_word(w)])
        self._store(self._last, [(w, n) for w, n in zip(later, counts, strict=True)
                                 if _last_word(w)])
        self._store(self._first, [(w, n) for w, n in zip(heads, head_counts, strict=True)
                                  if _first_word(w)])

    def _store(self, memo: dict[str, int], pairs: list[tuple[str, int]]) -> None:
        if len(memo) + len(pairs) > self.max_words:
            memo.clear()  # bounded: start over rather than track recency per word
        memo.update(pairs)
