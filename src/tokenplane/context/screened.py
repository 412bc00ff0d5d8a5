"""Packing what is left after the request's documents were screened (the governance
policy's injection screen and PII rules, ``governance/document_guard.py``), told as a
pack of every document offered: the packer sees only the documents kept, and its
result is mapped back to the request's positions, with the documents left out added
as drops of their own reason. The packer itself is untouched, and ``offered = kept +
dropped`` still holds over every document the request offered (a left-out document's
tokens are counted when the pack is settled)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tokenplane.context.documents import Document, Dropped, DropReason, Packed


def screened_documents(documents: Sequence[Document], texts: Sequence[str],
                       positions: Sequence[int]) -> list[Document]:
    """The documents at ``positions``, each with its screened text."""
    return [replace(documents[i], text=t) if documents[i].text is not t else documents[i]
            for i, t in zip(positions, texts, strict=True)]


def with_left_out(packed: Packed, positions: Sequence[int],
                  left_out: Sequence[tuple[int, Document]], reason: DropReason,
                  count: Callable[[str], int]) -> Packed:
    """``packed`` (of the documents at ``positions`` of the request, in that order) as
    a pack of the whole request: its documents' indices mapped back, and the
    ``left_out`` ones (request index, document) dropped for ``reason``, counted when
    it is settled (at once if it already was)."""
    packed.kept = [replace(k, index=positions[k.index]) for k in packed.kept]
    packed.dropped = [replace(d, index=positions[d.index]) for d in packed.dropped]
    inner = packed.deferred

    def settle() -> tuple[list[Dropped], int]:
        more, tokens = inner() if inner is not None else ([], 0)
        out = [replace(d, index=positions[d.index]) for d in more]
        extra = [Dropped(doc.id, i, reason, count(doc.text)) for i, doc in left_out]
        return out + extra, tokens + sum(d.tokens for d in extra)

    packed.deferred = settle
    if inner is None:
        packed.settle()
    return packed
