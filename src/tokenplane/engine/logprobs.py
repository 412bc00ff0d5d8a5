"""Plausible log-probabilities for the simulated engine's tokens, in OpenAI's two shapes.

Per output token: the sampled token is the most likely one (its logprob ``-x`` with
``x`` exponential, mean 0.35); the alternatives are other words of the vocabulary that
share what is left of the probability mass, each at most as likely as the one before,
so a top list is sorted, every value is <= 0 and the probabilities sum to <= 1.
Chat: ``{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}],
"refusal": null}``. Completions (legacy): ``{tokens, token_logprobs, top_logprobs:
[{token: logprob}], text_offset}``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

TokenLogprob = tuple[str, float, list[tuple[str, float]]]  # token, logprob, top list
_FLOOR = -9999.0  # OpenAI's value for "no probability worth printing"


def draw(rng: random.Random, token: str, k: int, vocab: Sequence[str]) -> TokenLogprob:
    """One token's logprob and its ``k`` most likely alternatives (itself first)."""
    lp = -rng.expovariate(1 / 0.35)
    p = math.exp(lp)
    top: list[tuple[str, float]] = [(token, lp)] if k else []
    left = 1.0 - p
    prev = p
    seen = {token}
    while len(top) < k:
        alt = rng.choice(vocab)
        if alt in seen:
            if len(seen) >= len(vocab):
                break
            continue
        seen.add(alt)
        q = min(prev, left * rng.uniform(0.2, 0.7))
        left -= q
        prev = q
        top.append((alt, math.log(q) if q > 0 else _FLOOR))
    return token, lp, top


def _entry(token: str, lp: float) -> dict[str, Any]:
    return {"token": token, "logprob": lp, "bytes": list(token.encode())}


def chat_entry(t: TokenLogprob) -> dict[str, Any]:
    out = _entry(t[0], t[1])
    out["top_logprobs"] = [_entry(tok, lp) for tok, lp in t[2]]
    return out


def chat_logprobs(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    return {"content": [chat_entry(t) for t in entries], "refusal": None}


def text_logprobs(entries: Sequence[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """The legacy completions shape; ``offset``: characters of text before these."""
    offsets = []
    pos = offset
    for tok, _, _ in entries:
        offsets.append(pos)
        pos += len(tok)
    return {
        "tokens": [t[0] for t in entries],
        "token_logprobs": [t[1] for t in entries],
        "top_logprobs": [dict(t[2]) if t[2] else {t[0]: t[1]} for t in entries],
        "text_offset": offsets,
    }
