"""Two gateway processes sharing the real Redis: 200 concurrent streams from five keys
of one tenant under a 10,000 tokens-per-minute limit.

Checked: the tokens billed in the window (from both ledgers) stay within the limit
plus the documented bound ``C x G``, the shared counters agree with the ledgers, and
no request is refused while the usage of the requests admitted before it is below
90 % of the limit."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import aiohttp

from tests.admission.conftest import REDIS_URL
from tests.admission.gateway_procs import GatewayProcess, ledger, stream_chat, write_config
from tokenplane.admission import Admission, RedisStore, Scope
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import LimitStore, LimitTarget

TENANT = "conc"
LIMIT = 10_000
G = 16
N = 200
MESSAGES = [{"role": "user", "content": "Write about tokens."}]
PREDICTED = 40
# three keys ask for the prediction exactly (no debit), two for 72 = 40 + 2 debits of 16
# (no unused cover at the end either way)
MAX_TOKENS = (40, 40, 40, 72, 72)


async def test_two_gateways_share_a_tpm_limit(tmp_path: Path, redis_prefix: str) -> None:
    homes = [tmp_path / "gw1", tmp_path / "gw2"]
    homes[0].mkdir()
    keystore = KeyStore(homes[0] / "meta.db")
    keys = [keystore.create_key(TENANT, department="d", app=f"app{i}")[0] for i in range(5)]
    keystore.close()
    limits = LimitStore(homes[0] / "meta.db")
    limits.set(LimitTarget(TENANT), {"tpm": LIMIT})
    limits.close()
    shutil.copytree(homes[0], homes[1])  # a second replica with the same keys and limits
    # (a store call gets 5 s, not 0.5: on a loaded box a timed-out call is a 503,
    # fail-closed as configured, and this test is about the limit's exactness)
    admission = {"key_prefix": redis_prefix, "predict_output": False, "timeout_s": 5.0,
                 "default_output_tokens": PREDICTED, "debit_granularity": G, "replicas": 2}
    procs = [GatewayProcess(write_config(h, REDIS_URL, admission), h / "stderr.log")
             for h in homes]
    await asyncio.gather(*(p.start() for p in procs))
    try:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0)) as session:
            started = time.time()
            results = await asyncio.gather(*(
                stream_chat(session, procs[i % 2].url, keys[i % 5], MAX_TOKENS[i % 5],
                            MESSAGES)
                for i in range(N)))
            elapsed = time.time() - started
    finally:
        await asyncio.gather(*(p.stop() for p in procs))
    assert elapsed < 50  # the whole run sits inside one 60 s window

    admitted = [r for r in results if r["status"] == 200]
    refused = [r for r in results if r["status"] != 200]
    assert {r["status"] for r in refused} <= {429}
    assert {r["code"] for r in refused} <= {"rate_limit_exceeded"}
    assert admitted and refused  # the demand (~13,500 tokens) is well over the limit

    rows = [r for h in homes for r in ledger(h, f"tenant = '{TENANT}'")]
    assert len(rows) == N
    billed = sum(r["input_tokens"] + r["output_tokens"] for r in rows)
    concurrency = len(admitted)  # every admitted stream may be in flight at once
    assert billed <= LIMIT + concurrency * G, billed
    # every forwarded token was granted: clients never saw more than the store let through
    assert sum(r["chunks"] for r in admitted) <= billed - sum(r["input_tokens"] for r in rows)

    # streams a limit ended are marked in the ledger, and only those
    cut = [r for r in admitted if r["chunks"] < r["max_tokens"]]
    assert all(r["finish"] == "length" for r in admitted)
    assert sum("budget_stopped" in (r["flags"] or "") for r in rows) == len(cut)

    # the shared counters hold exactly what the ledgers billed
    store = RedisStore.from_url(REDIS_URL, prefix=redis_prefix)
    table = LimitStore(homes[0] / "meta.db")
    status = await Admission(table.table, store).status(TENANT, Scope("tenant", TENANT),
                                                        time.time())
    table.close()
    await store.close()
    assert status[0].spent == billed and status[0].reserved == 0

    # Refusals only for want of room: within one window the counters only grow (the
    # cover is used exactly, so nothing is refunded), hence what was billed in the end
    # is at least what the window held at any refusal, which left no room for one
    # more request (its prompt + the prediction).
    size = max(r["input_tokens"] for r in rows) + PREDICTED
    assert billed >= LIMIT - size >= 0.9 * LIMIT
    print(f"admitted {len(admitted)} ({len(cut)} cut), refused {len(refused)}, billed {billed} "
          f"(limit {LIMIT}, bound {LIMIT + concurrency * G}), elapsed {elapsed:.1f}s")
