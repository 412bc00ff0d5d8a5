"""The compact prefix fingerprints the ledger records (``segment_runs``) give the
router's block hashes back exactly (``blocks_of_runs``), one entry per segment."""

from __future__ import annotations

import random

from tokenplane.routing.gateway.prompt_blocks import (
    blocks_of_runs,
    chained_block_hashes,
    segment_runs,
)


def test_runs_rebuild_the_router_hashes() -> None:
    rng = random.Random(7)
    for _ in range(300):
        segs = [(rng.randint(1, 3000), f"seg{rng.random()}") for _ in range(rng.randint(1, 30))]
        blocks = chained_block_hashes(segs, rng.randint(0, 40_000), 16)
        runs = segment_runs(blocks)
        assert blocks_of_runs(runs) == blocks
        assert len(runs) <= len(segs) and all(n > 0 for _, n in runs)


def test_a_shared_prefix_shares_its_leading_runs() -> None:
    system = (4000, "you are a helpful assistant" * 100)
    a = segment_runs(chained_block_hashes([system, (300, "first question")], 1200, 16))
    b = segment_runs(chained_block_hashes([system, (300, "other question")], 1200, 16))
    assert a[0] == b[0] and a[1][0] != b[1][0]
    assert segment_runs([]) == []
