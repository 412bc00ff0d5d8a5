"""The console's Audit page over a large audit log: under 500 ms p95, cold and warm.

Writes ``--records`` audit records (default 200,000) over the last 24 hours into
``<home>/audit/w0`` (the log ``tokenplane serve``'s worker continues) with the
gateway's own key and its default log settings (a checkpoint every 100 records,
segments rotated by UTC day or past 256 MB, so the window spans two segments): 8
tenants of very different sizes (one with 0.2% of the records), 4 apps each, about
820 bytes a record with the checkpoints (the request-path bench's averaged 690).
Then starts ``tokenplane serve`` on that data directory ``--rounds`` times for each
source tree in ``--src`` (alternating: A B A B ...), and after each start asks each
page once (*cold*: the first view after the start, admin pages first, then a
tenant's), then ``--repeat`` times (*warm*). Every tree's rows are checked equal,
page by page (except an app filter, which main applied after its row limit).
``--during-verify``: each tree once more, a tenant's Audit page asked over and over
while an admin's **Verify the chain** runs. Prints JSON; ``--out FILE`` also writes it.

    git archive main | tar -x -C /tmp/before        # the tree to compare with
    python bench/bench_audit_page.py --keep /tmp/audit-home \
        --src before=/tmp/before/src --src after=src [--records 200000] [--rounds 3]
        [--repeat 10] [--during-verify] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.keyfile import resolve_key
from tokenplane.governance.audit.log import AuditLog
from tokenplane.meta.keystore import KeyStore

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_console import Server, sign_in, summary

CONFIG = """\
models:
  - alias: m0
    chat_template: llama3
    backends: [{type: sim, profile: instant, replicas: 1}]
observe: {metrics: {listen: null}, access_log: {enabled: false}}
"""
# tenants and their shares of the traffic
TENANTS = (("bigco", 40), ("acme", 20), ("globex", 15), ("initech", 10), ("umbrella", 8),
           ("hooli", 4), ("wonka", 2.8), ("tiny", 0.2))
WORKER = "w0"  # the log directory ``tokenplane serve``'s one worker writes
ROW = re.compile(rb'<tr data-request="([^"]+)">')
PAGES = {
    "admin": ["/console/audit", "/console/audit?verdict=block",
              "/console/audit?tenant=tiny", "/console/audit?app=app2&since=2h"],
    "tenant acme": ["/console/audit", "/console/audit?verdict=flag"],
    "tenant tiny": ["/console/audit"],
}


def generate(home: Path, n: int, end: float, seed: int = 0) -> float:
    """``n`` records over the 24 hours before ``end``; returns the seconds taken."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    key, _ = resolve_key(home, "TOKENPLANE_AUDIT_KEY") or (b"", None)
    log = AuditLog(home / "audit" / WORKER, key, redactor=lambda s: s)
    names = [t for t, _ in TENANTS]
    weights = [w for _, w in TENANTS]
    words = ("budget", "forecast", "invoice", "quarter", "supplier", "contract", "summary")
    start = end - 86400 + 30
    for i in range(n):
        tenant = rng.choices(names, weights)[0]
        app = f"app{rng.randrange(4)}"
        verdict = "block" if i % 997 == 0 else "flag" if i % 31 == 0 else "allow"
        text = " ".join(rng.choice(words) for _ in range(30))
        log.append(AuditEntry(
            request_id=f"req_{i:08d}", tenant=tenant, app=app,
            key_id=f"key_{tenant}_{app}", principal=f"{tenant}-svc", model="m0",
            backend="sim-0", status=200, tokens={"input": 120 + i % 500, "output": 40},
            limits={"tpm": 100_000}, verdicts={"pii": [], "injection": 0.0},
            verdict=verdict,
            content={"messages": [{"role": "user", "content": text}]}),
            ts=start + i * (86400 - 60) / n)
    log.close()
    return time.perf_counter() - t0


def view(h: httpx.Client, url: str) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    r = h.get(url)
    ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return ms, ROW.findall(r.content)


def during_verify(base: str, keys: dict[str, str]) -> dict[str, Any]:
    """The admin's Verify the chain running, and the Audit page asked meanwhile."""
    clients = {who: sign_in(base, key) for who, key in keys.items()}
    admin = clients["admin"]
    token = re.search(r'name="csrf" value="([^"]+)"', admin.get("/console/audit").text)
    assert token is not None
    done: list[float] = []

    def run() -> None:
        t0 = time.perf_counter()
        r = admin.post("/console/audit/verify", data={"csrf": token.group(1)},
                       headers={"origin": base}, timeout=900)
        assert r.status_code == 200 and "chain-table" in r.text, r.text[:300]
        done.append(time.perf_counter() - t0)

    thread = threading.Thread(target=run)
    thread.start()
    times: dict[str, list[float]] = {}
    try:
        while thread.is_alive():
            for who in ("tenant acme", "tenant tiny"):
                times.setdefault(who, []).append(view(clients[who], "/console/audit")[0])
        thread.join()
    finally:
        for h in clients.values():
            h.close()
    return {"verify_s": round(done[0], 1) if done else None,
            "pages": {who: summary(v) for who, v in times.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--src", action="append", default=[],
                    help="NAME=DIR: a source tree to serve with (repeatable; default after=src)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--keep", default=None, help="Keep (or reuse) the data directory here.")
    ap.add_argument("--during-verify", action="store_true",
                    help="Also time the page while the chain is verified (each tree once).")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    trees = dict(s.split("=", 1) for s in args.src) or {"after": "src"}
    home = Path(args.keep or tempfile.mkdtemp(prefix="bench-audit-page-"))
    home.mkdir(parents=True, exist_ok=True)
    gen_s = 0.0
    if not (home / "audit" / WORKER).exists():
        gen_s = generate(home, args.records, time.time() - 60)
    size = sum(p.stat().st_size for p in (home / "audit").rglob("audit-*.jsonl"))
    segments = len(list((home / "audit").rglob("audit-*.jsonl")))
    keys = KeyStore(home / "meta.db")
    who_keys = {"admin": keys.create_key("ops", admin=True)[0],
                "tenant acme": keys.create_key("acme", app="app1")[0],
                "tenant tiny": keys.create_key("tiny", app="app0")[0]}
    keys.close()
    (home / "gw.yaml").write_text(CONFIG)
    cold: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    warm: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
    rows: dict[str, dict[str, list[bytes]]] = {t: {} for t in trees}
    for _ in range(args.rounds):
        for tree, src in trees.items():
            with Server(home, src) as server:
                clients = {who: sign_in(server.base, key) for who, key in who_keys.items()}
                try:
                    for who, urls in PAGES.items():
                        ms, found = view(clients[who], urls[0])
                        cold[tree].setdefault(f"{who} {urls[0]}", []).append(ms)
                    for who, urls in PAGES.items():
                        for url in urls:
                            for _ in range(args.repeat):
                                ms, found = view(clients[who], url)
                                warm[tree].setdefault(f"{who} {url}", []).append(ms)
                            rows[tree].setdefault(f"{who} {url}", found)
                finally:
                    for h in clients.values():
                        h.close()
    verifying = {}
    if args.during_verify:
        for tree, src in trees.items():
            with Server(home, src) as server:
                verifying[tree] = during_verify(server.base, who_keys)
    names = list(trees)
    for page, found in rows[names[0]].items():  # every tree shows the same rows
        for other in names[1:]:  # (but main filtered by app after its row limit)
            assert "app=" in page or rows[other][page] == found, (page, other)
    out = {"records": args.records, "log_bytes": size, "segments": segments,
           "generate_s": round(gen_s, 1), "rounds": args.rounds, "repeat": args.repeat,
           "load_average": os.getloadavg(),
           "rows_shown": {t: {p: len(r) for p, r in rows[t].items()} for t in names},
           "trees": {t: {"cold": {p: summary(v) for p, v in cold[t].items()},
                         "warm": {p: summary(v) for p, v in warm[t].items()}}
                     for t in names},
           "during_verify": verifying}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
