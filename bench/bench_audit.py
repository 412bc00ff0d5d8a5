"""The audit writer's cost per record with the default configuration, and verify's speed.

    python bench/bench_audit.py [--n 50000] [--rounds 5]

Appends ``n`` records (retention ``none``, so the figure is the chain, the checkpoints
and the head, not redaction) with ``governance.audit``'s default ``checkpoint_every``,
committing every ``flush_every`` records (a gateway at 5,000 requests/s flushes every
1,000 with the default 0.2 s interval); the best of ``rounds``, in CPU time of this
process (user + system: steadier than wall time on a shared machine). Also the time
of one checkpoint and of one append + flush (head signature and write), and
records/s of ``verify``. Runs against whatever
``tokenplane`` is importable (the same calls work on versions before Ed25519, to
compare).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from tokenplane.config.governance_schema import AuditConfig
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.verify import verify

KEY = b"bench-key-bench-key-bench-key-32"
T0 = 1.767e9


def _entry(i: int) -> AuditEntry:
    return AuditEntry(request_id=f"req-{i:08d}", tenant="acme", key_id="key-1",
                      principal="user-7", app="support", model="chat", backend="vllm-a",
                      status=200, tokens={"prompt_tokens": 812, "completion_tokens": 210},
                      limits={"applied": [{"scope": "tenant:acme", "rule": "tpm"}]},
                      verdicts={"injection": {"action": "none"}}, verdict="allow")


def append_us(n: int, flush_every: int, checkpoint_every: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        log = AuditLog(Path(tmp) / "a", KEY, checkpoint_every, retention="none")
        entries = [_entry(i) for i in range(n)]
        t = time.process_time()
        for i, e in enumerate(entries):
            log.append(e, ts=T0 + i * 0.0002)
            if (i + 1) % flush_every == 0:
                log.flush()
        log.close()
        return (time.process_time() - t) / n * 1e6


def sign_us(rounds: int = 1000) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        log = AuditLog(Path(tmp) / "a", KEY, 1_000_000, retention="none")
        log.append(_entry(0), ts=T0)
        t = time.process_time()
        for i in range(rounds):
            log.checkpoint(T0 + i)
        checkpoint = (time.process_time() - t) / rounds * 1e6
        t = time.process_time()
        for i in range(rounds):
            log.append(_entry(i), ts=T0 + i)
            log.flush()
        head = (time.process_time() - t) / rounds * 1e6
        log.close()
    return {"checkpoint_us": round(checkpoint, 1), "append_and_flush_us": round(head, 1)}


def verify_records_per_s(n: int, checkpoint_every: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a"
        log = AuditLog(path, KEY, checkpoint_every, retention="none")
        for i in range(n):
            log.append(_entry(i), ts=T0 + i * 0.0002)
        log.close()
        t = time.perf_counter()
        result = verify(path, KEY)
        assert result.ok, result.reason
        return round(result.records / (time.perf_counter() - t))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--flush-every", type=int, default=1000)
    args = parser.parse_args()
    every = AuditConfig().checkpoint_every
    best = min(append_us(args.n, args.flush_every, every) for _ in range(args.rounds))
    print(json.dumps({
        "bench": "audit",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {platform.python_implementation()} "
                   f"{platform.python_version()}",
        "checkpoint_every": every,
        "append_us_per_record": round(best, 2),
        **sign_us(),
        "verify_records_per_s": verify_records_per_s(args.n, every),
    }, indent=2))


if __name__ == "__main__":
    main()
