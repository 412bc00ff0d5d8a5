"""Approximate prefix block hashes of a request, without tokenizing the prompt.

The gateway counts prompt tokens but does not keep token ids (tokenizing whole
prompts again would be too costly). Routing only needs *equal prefixes to give
equal leading hashes*, and roughly the right number of blocks. So each content
segment (a chat message: role + content; a text prompt: fixed-size slices; the
request's operation says what they are, ``Operation.prefix_segments``) gets a
chained hash (the hash of the segment and of the hash before it; Python's own
string hash: the index lives in one process, so it need not be stable across
processes), and the
request's prompt tokens are spread over the segments by their share of the
characters. Segment ``i`` ends at cumulative token ``b_i``; it contributes the
blocks ``floor(b_{i-1} / B) .. floor(b_i / B) - 1`` (only full blocks, as an engine
caches them), each ``segment hash XOR block number``. Two requests sharing
their first k messages therefore share (about) the blocks of those messages.
See docs/ROUTING.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol

Segment = tuple[int, Hashable]  # (characters, hashable content)


class PromptParts(Protocol):
    """An endpoint kind as routing sees it (``tokenplane.operations``): its prompt as
    ordered content segments, or None when the kind has no prefix to reuse."""

    def prefix_segments(self, body: dict[str, Any]) -> Sequence[Segment] | None: ...


def chained_block_hashes(
    segs: Sequence[Segment], prompt_tokens: int, block_size: int
) -> list[int]:
    """Pseudo block hashes for ``prompt_tokens`` spread over ``segs`` by length."""
    total_chars = sum(n for n, _ in segs)
    if not segs or prompt_tokens < block_size or total_chars == 0:
        return []
    out: list[int] = []
    h = 0
    chars = 0
    done_blocks = 0
    for n, key in segs:
        h = hash((h, key))
        chars += n
        end_blocks = (prompt_tokens * chars // total_chars) // block_size
        if end_blocks > done_blocks:
            out.extend(h ^ j for j in range(done_blocks, end_blocks))
            done_blocks = end_blocks
    return out


def request_block_hashes(
    operation: PromptParts, body: dict[str, Any], prompt_tokens: int, block_size: int
) -> list[int]:
    """:func:`chained_block_hashes` of a request body, from the segments its endpoint
    kind gives (none for a kind without any, such as embeddings)."""
    if prompt_tokens < block_size:
        return []
    segs = operation.prefix_segments(body)
    if segs is None:
        return []
    return chained_block_hashes(segs, prompt_tokens, block_size)


def segment_runs(block_hashes: Sequence[int]) -> list[tuple[int, int]]:
    """The compact form of :func:`chained_block_hashes`' output: one ``(segment hash,
    blocks)`` per segment that spans a full block, in order. Block ``j`` of a segment
    with chained hash ``h`` is ``h ^ j``: ``b ^ j`` is ``h`` along the segment and
    (but for a 64-bit collision) nowhere after it, so each segment's end is found by
    bisection, O(segments x log blocks) rather than a look at every block. Segments
    that span no full block are chained into the next one's hash: no entry needed."""
    out: list[tuple[int, int]] = []
    n = len(block_hashes)
    start = 0
    while start < n:
        h = block_hashes[start] ^ start
        lo, hi = start + 1, n  # the end lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if block_hashes[mid] ^ mid == h:
                lo = mid + 1
            else:
                hi = mid
        out.append((h, lo - start))
        start = lo
    return out


def blocks_of_runs(runs: Sequence[Sequence[int]]) -> list[int]:
    """Inverse of :func:`segment_runs`: the router's block hashes again."""
    out: list[int] = []
    for h, n in runs:
        start = len(out)
        out.extend(map(h.__xor__, range(start, start + n)))
    return out
