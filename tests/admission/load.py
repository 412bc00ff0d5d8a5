"""Concurrent streaming clients against one tenant: the load of the Redis tests.

Every request reserves prompt + predicted output (the predictor under-predicts by
0..8 tokens), streams its output token by token with a post-debit of G tokens, and
reconciles what it really generated. Time is frozen at ``now`` so every token
lands in one window; the clients yield to each other between tokens.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import asdict, dataclass

from tokenplane.admission import (
    Admission,
    Amounts,
    Denial,
    LimitTable,
    Parties,
    Scope,
    ScopeLimits,
)
from tokenplane.admission.stores.base import CounterStore

TENANT = "acme"
TPM = 10_000
G = 16


@dataclass
class LoadResult:
    granted: int = 0
    denied: int = 0
    cut: int = 0
    billed: int = 0
    inflight: int = 0
    max_inflight: int = 0
    bad_denials: int = 0


def table() -> LimitTable:
    return LimitTable({Scope("tenant", TENANT): ScopeLimits(tpm=TPM)})


async def one_request(adm: Admission, res: LoadResult, rng: random.Random, key: str,
                      now: float) -> None:
    prompt, actual = rng.randint(20, 60), rng.randint(10, 80)
    predicted = max(0, actual - rng.randint(0, 8))
    scopes = Parties(TENANT, app="bench", key=key).scope_chain("m")
    grant = await adm.reserve(scopes, Amounts(1, prompt, predicted), now)
    if isinstance(grant, Denial):
        res.denied += 1
        if grant.remaining >= prompt + predicted:
            res.bad_denials += 1
        return
    res.granted += 1
    res.inflight += 1
    res.max_inflight = max(res.max_inflight, res.inflight)
    covered = generated = 0
    while generated < actual:
        await asyncio.sleep(0)  # let the other clients interleave
        generated += 1
        if generated - covered - predicted >= G:
            if (await adm.debit(grant, G, now)).ok:
                covered += G
            else:
                res.cut += 1
                break
    await adm.reconcile(grant, Amounts(1, prompt, generated), now)
    res.inflight -= 1
    res.billed += prompt + generated


async def run_load(store: CounterStore, n: int, seed: int, now: float) -> dict[str, int]:
    adm = Admission(table(), store)
    res = LoadResult()
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(5)]
    await asyncio.gather(*(one_request(adm, res, rng, keys[i % 5], now) for i in range(n)))
    return asdict(res)
