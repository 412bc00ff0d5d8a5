"""Deterministic prompts-to-output helpers for the simulated engine's service.

* ``block_hashes``: chained hash per full block of prompt token ids (equal hash at
  block i means equal prefix through block i), the key of the prefix cache.
* ``WordPool``: token ids that each decode to one space-prefixed common English
  word and re-encode to exactly that one id, so generated text re-tokenizes to the
  same count.
* ``natural_length`` / ``output_ids``: the length and ids a prompt "generates",
  seeded by the prompt so the same prompt always gives the same answer.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from tokenplane.tokens.base import Tokenizer

_WORD_TEXT = (
    "the of and to in is was for on that with as by at from his her an which are this "
    "be have not but had they you were their one all we can has there been if more when "
    "will would who so no time people year way day man thing woman life child world "
    "school state family student group country problem hand part place case week company "
    "system program question work government number night point home water room mother "
    "area money story fact month lot right study book eye job word business issue side "
    "kind head house service friend father power hour game line end member law car city "
    "community name president team minute idea body information back parent face others "
    "level office door health person art war history party result change morning reason "
    "research girl guy moment air teacher force education good new first last long great "
    "little own other old big high different small large next early young important few "
    "public bad same able make know take see come think look want give use find tell ask "
    "seem feel try leave call keep let begin show hear play run move like live believe "
    "bring happen write provide sit stand lose pay meet include continue set learn lead "
    "understand watch follow stop create speak read allow add spend grow open walk win "
    "offer remember love consider appear buy wait serve die send expect build stay fall"
)


def block_hashes(ids: Sequence[int], block_size: int = 16) -> list[int]:
    """One chained hash per full block of ids."""
    out: list[int] = []
    prev = 0
    for start in range(0, len(ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(ids[start : start + block_size])))
        out.append(prev)
    return out


def prompt_seed(ids: Sequence[int]) -> int:
    """A stable 64-bit seed from the prompt ids (independent of PYTHONHASHSEED)."""
    digest = hashlib.blake2b(
        b"".join(i.to_bytes(4, "little", signed=True) for i in ids), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little")


def natural_length(ids: Sequence[int], low: int = 16, high: int = 256) -> int:
    """The output length of a prompt when the client sets no max_tokens."""
    return low + prompt_seed(ids) % (high - low + 1)


class WordPool:
    """Single-token, space-prefixed English words of one tokenizer."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        ids: list[int] = []
        for word in _WORD_TEXT.split():
            enc = tokenizer.encode(" " + word)
            if len(enc) == 1 and tokenizer.decode(enc) == " " + word:
                ids.append(enc[0])
        if len(ids) < 16:
            raise ValueError(f"tokenizer {tokenizer.name!r} has too few single-token words")
        self.ids = ids
        self._tokenizer = tokenizer

    def output_ids(self, prompt: Sequence[int], n: int) -> list[int]:
        """n ids drawn from the pool, seeded by the prompt."""
        return random.Random(prompt_seed(prompt)).choices(self.ids, k=n)

    def text(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids)
