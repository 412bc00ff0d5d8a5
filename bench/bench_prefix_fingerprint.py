"""What recording the prompt's prefix fingerprints costs a request (ledger column
``prefix_segments``, set by the meter finisher): ``segment_runs`` over the block hashes
the route stage already computed, plus the JSON text, against computing those hashes
(``chained_block_hashes``, which the router does anyway). Per request, in microseconds.

Usage: python bench/bench_prefix_fingerprint.py
"""

from __future__ import annotations

import json
import timeit

import orjson

from tokenplane.routing.gateway.prompt_blocks import chained_block_hashes, segment_runs


def case(prompt_tokens: int, turns: int) -> dict[str, float]:
    segs = [(4000, "system " * 600)] + [(400, f"turn {i} " * 60) for i in range(turns)]
    blocks = chained_block_hashes(segs, prompt_tokens, 16)
    n = 2000
    record = timeit.timeit(lambda: orjson.dumps(segment_runs(blocks)).decode(), number=n)
    hashes = timeit.timeit(lambda: chained_block_hashes(segs, prompt_tokens, 16), number=n)
    return {"prompt_tokens": prompt_tokens, "segments": turns + 1, "blocks": len(blocks),
            "record_us": round(record / n * 1e6, 2),
            "router_hashes_us": round(hashes / n * 1e6, 2),
            "json_bytes": len(orjson.dumps(segment_runs(blocks)))}


if __name__ == "__main__":
    print(json.dumps([case(1000, 2), case(8000, 10), case(32000, 40)], indent=2))
