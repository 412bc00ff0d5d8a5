"""The exact count of a packed block from its documents' counts, without tokenizing it.

A block is ``header``, then ``[1] (source) text``, ``[2] ...``, joined by ``"\\n\\n"``.
For a tokenizer whose pre-tokens break at a newline followed by ``[`` and at a space
between two non-space characters (``tokens/space_splits.py``: tiktoken's cl100k_base
and o200k_base, Qwen, Llama 3, DeepSeek V3), the block's count is the sum of its
pieces' counts, each piece with the join after it (the break before every ``[``).
Within a piece ``prefix + text + join``, the first and the last break of ``text`` cut
off its head and its tail, whose counts change next to the marker and the join; the
middle counts as it does in ``text`` alone:

    count(piece) = count(text) - count(head) + count(prefix + head)
                               - count(tail) + count(tail + join)

where ``count(text)`` is the document's count the packer already has, and the four
others are counts of a few words. A text with no break (one long word, Chinese with no
space) is counted with its prefix and join whole, and a block holding special-token
text (which the breaks say nothing about) is counted whole: the result is always what
counting the joined block gives (``tests/context/test_block_count.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tokenplane.tokens.space_splits import SplitCounting, first_break, last_break

SEPARATOR = "\n\n"


def block_tokens(header: str, pieces: Sequence[tuple[str, str, int]], joins: SplitCounting,
                 count: Callable[[str], int]) -> int:
    """The exact count of ``SEPARATOR.join([header] + [prefix + text, ...])`` (no header
    when it is empty; 0 with no pieces) for ``pieces`` of ``(prefix, text, tokens)``,
    ``tokens`` the exact count of ``text`` by ``joins``' tokenizer; ``count`` counts the
    whole block when a piece holds special-token text."""
    if not pieces:
        return 0
    if not all(joins.ordinary(p) and joins.ordinary(t) for p, t, _ in pieces) or (
            header and not joins.ordinary(header)):
        return count(SEPARATOR.join(([header] if header else [])
                                    + [p + t for p, t, _ in pieces]))
    n = joins.count(header + SEPARATOR) if header else 0
    last = len(pieces) - 1
    for i, (prefix, text, tokens) in enumerate(pieces):
        join = SEPARATOR if i < last else ""
        first = first_break(text)
        if first is None:
            n += joins.count(prefix + text + join)
            continue
        end = last_break(text)
        assert end is not None
        head, tail = text[:first], text[end:]
        n += (tokens - joins.count(head) + joins.count(prefix + head)
              - joins.count(tail) + joins.count(tail + join))
    return n
