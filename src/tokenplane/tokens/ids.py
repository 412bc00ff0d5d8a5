"""Token ids a client sends in place of text (completions ``prompt``, embeddings
``input``): each must be an integer a tokenizer could have produced.

The vocabulary size is known to some tokenizers only (``n_vocab``); without it the
bound is conservative: ids are 32-bit non-negative integers, so an id no vocabulary
holds (``1000000000000``, ``-1``) is a client's mistake (400), not a server error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tokenplane.errors import invalid

MAX_TOKEN_ID = 2**31 - 1


def vocab_size(tokenizer: Any) -> int | None:
    """The tokenizer's vocabulary size, when it tells (``n_vocab`` / ``vocab_size``)."""
    for attr in ("n_vocab", "vocab_size"):
        size = getattr(tokenizer, attr, None)
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return size
    return None


def check_token_ids(ids: Iterable[Any], param: str, vocab: int | None = None) -> None:
    """Raise a 400 naming ``param`` unless every id is an int in ``[0, vocab)``
    (``[0, 2**31)`` when the vocabulary size is unknown)."""
    limit = min(vocab, MAX_TOKEN_ID + 1) if vocab else MAX_TOKEN_ID + 1
    for t in ids:
        if not isinstance(t, int) or isinstance(t, bool):
            raise invalid(f"'{param}' token ids must be integers, got {t!r}", param=param,
                          code="invalid_token_id")
        if t < 0 or t >= limit:
            raise invalid(f"'{param}' holds token id {t}, outside the vocabulary "
                          f"[0, {limit})", param=param, code="invalid_token_id")
