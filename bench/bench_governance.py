"""Governance benchmarks: PII scan, streaming restore, audit append.

Prints one JSON object. Each figure comes with a baseline measured in the same run:
- PII scan of an 8 KB mixed Chinese/English prompt with all built-in recognizers,
  against one compiled regular expression (the resident-ID pattern) over the same text;
- the heuristic injection screen at 0.5 / 2 / 8 KB, against one regex search;
- streaming restore of a tokenized response, against passing chunks through untouched,
  and the delay it adds, in chunks;
- audit append (hash chain + checkpoints + group commit), against a plain unchained
  JSONL append of the same records.

Run: python bench/bench_governance.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.injection.detector import HeuristicDetector
from tokenplane.governance.injection.normalize import normalize
from tokenplane.governance.pii_policy import PiiAction, PiiPolicy, apply
from tokenplane.governance.vault import StreamRestorer, Vault

ZH = [
    "请帮我总结一下这份合同的主要条款，重点关注付款方式和违约责任。",
    "客户反馈说上周的订单还没有收到，希望我们尽快处理。",
    "会议定于下周三下午三点在北京总部召开，请各部门负责人准时参加。",
    "这是一段普通的中文文本，用于模拟企业内部知识库中的文档内容。",
    "根据公司规定，所有外部合作方的数据都需要经过脱敏处理后才能使用。",
    "本季度营业收入同比增长百分之十二，主要来自华东地区的新客户。",
]
EN = [
    "Please summarize the following document and list the action items. ",
    "The quarterly report shows steady growth in the enterprise segment. ",
    "Our support team will follow up with the customer by the end of the week. ",
    "This is ordinary English prose of the kind found in internal wikis and tickets. ",
    "Make sure the migration plan covers rollback and data validation steps. ",
]
PII = [
    "客户张三的身份证号是11010519491231002X，",
    "联系电话138 0013 8000，",
    "Contact john.doe@example.com for details. ",
    "退款请打到卡号6222021234567890128。",
    "The server at 10.20.30.40 was restarted. ",
    "api_key=9f8e7d6c5b4a39281706ab ",
]


def sample_prompt(size: int = 8192, seed: int = 1) -> str:
    rnd = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        r = rnd.random()
        s = rnd.choice(PII) if r < 0.1 else rnd.choice(ZH if r < 0.55 else EN)
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def digit_heavy_prompt(size: int = 8192, seed: int = 2) -> str:
    rnd = random.Random(seed)
    out: list[str] = []
    n = 0
    while n < size:
        s = rnd.choice(
            [
                "订单号20231128123456，金额1234.56元，",
                "2023-11-28 15:30:45 INFO request 8812 took 35 ms; ",
                "version 1.2.3 build 4567 ",
                rnd.choice(PII),
            ]
        )
        out.append(s)
        n += len(s.encode())
    return "".join(out)


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    times: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def pii_scan(repeat: int) -> dict[str, object]:
    analyzer = Analyzer()
    baseline = re.compile(r"[1-8][0-9]{16}[0-9Xx](?![0-9A-Za-z])", re.ASCII)
    result: dict[str, object] = {}
    for name, text in [("mixed_8k", sample_prompt()), ("digit_heavy_8k", digit_heavy_prompt())]:
        nbytes = len(text.encode())
        analyzer.analyze(text)  # warm up
        ts = timed(lambda t=text: analyzer.analyze(t), repeat)  # type: ignore[misc]
        base = timed(lambda t=text: baseline.findall(t), repeat)  # type: ignore[misc]
        p50 = statistics.median(ts)
        result[name] = {
            "bytes": nbytes,
            "findings": len(analyzer.analyze(text)),
            "p50_ms": round(p50 * 1e3, 4),
            "p90_ms": round(sorted(ts)[int(0.9 * len(ts))] * 1e3, 4),
            "mb_per_s": round(nbytes / p50 / 1e6, 2),
            "baseline_single_regex_p50_ms": round(statistics.median(base) * 1e3, 4),
            "target_p50_ms": 1.0,
        }
    return result


def injection_screen(repeat: int) -> dict[str, object]:
    """Heuristic injection screen: normalisation + every rule, per prompt size."""
    detector = HeuristicDetector()
    baseline = re.compile(r"ignore (?:all )?previous instructions")
    result: dict[str, object] = {}
    for size in (512, 2048, 8192):
        text = sample_prompt(size, seed=4)
        ts = timed(lambda t=text: detector.score(t, "user"), repeat)  # type: ignore[misc]
        norm = timed(lambda t=text: normalize(t), repeat)  # type: ignore[misc]
        base = timed(lambda t=text: baseline.search(t.lower()), repeat)  # type: ignore[misc]
        result[f"{size}B"] = {
            "p50_ms": round(statistics.median(ts) * 1e3, 4),
            "normalize_p50_ms": round(statistics.median(norm) * 1e3, 4),
            "baseline_one_regex_p50_ms": round(statistics.median(base) * 1e3, 4),
        }
    return result


def stream_restore(repeat: int, chunk_chars: int = 4) -> dict[str, object]:
    text = sample_prompt(4096, seed=3)
    vault = Vault()
    tokenized, _ = apply(text, PiiPolicy(default=PiiAction.TOKENIZE), vault)
    chunks = [tokenized[i : i + chunk_chars] for i in range(0, len(tokenized), chunk_chars)]

    def restore() -> str:
        r = StreamRestorer(vault)
        return "".join([r.feed(c) for c in chunks]) + r.flush()

    def passthrough() -> str:
        return "".join([c for c in chunks])

    assert restore() == text
    ts = timed(restore, repeat)
    base = timed(passthrough, repeat)
    # Delay: for each output character, chunks between the arrival of the chunk that
    # completes its source (a plain character, or a placeholder's closing '>') and
    # the chunk in which it is shown.
    arrival: list[int] = []  # per output char, index of the chunk completing its source
    pos = 0
    for m in re.finditer(r"<[A-Z][A-Z0-9_]*_[0-9]+>", tokenized):
        arrival.extend(i // chunk_chars for i in range(pos, m.start()))
        value = vault.lookup(m.group(0)) or m.group(0)
        arrival.extend([(m.end() - 1) // chunk_chars] * len(value))
        pos = m.end()
    arrival.extend(i // chunk_chars for i in range(pos, len(tokenized)))
    shown: list[int] = []
    r = StreamRestorer(vault)
    for idx, c in enumerate(chunks):
        shown.extend([idx] * len(r.feed(c)))
    shown.extend([len(chunks)] * len(r.flush()))
    delays = [s - a for s, a in zip(shown, arrival, strict=True)]
    per_chunk_us = statistics.median(ts) / len(chunks) * 1e6
    return {
        "chunks": len(chunks),
        "chunk_chars": chunk_chars,
        "placeholders": len(vault),
        "per_chunk_us": round(per_chunk_us, 3),
        "baseline_passthrough_per_chunk_us": round(statistics.median(base) / len(chunks) * 1e6, 3),
        "added_delay_chunks_max": max(delays),
        "chars_delayed": sum(1 for d in delays if d > 0),
        "target_added_delay_chunks_max": 1,
    }


def _entry(i: int, content: object) -> AuditEntry:
    return AuditEntry(
        request_id=f"req-{i}",
        tenant=f"tenant-{i % 7}",
        key_id=f"key-{i % 31}",
        principal="svc-chat",
        model="qwen2.5-72b-instruct",
        backend="vllm-pool-a",
        status=200,
        tokens={"system": 120, "user": 340, "output": 210, "cached": 64},
        limits={"tpm": 200_000, "reserved": 900},
        verdicts={"pii": ["CN_MOBILE"], "injection": 0.05},
        verdict="allow",
        content=content,
    )


def audit_append(n: int) -> dict[str, object]:
    key = b"bench-key-bench-key-bench-key-32"
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base_path = Path(tmp) / "plain.jsonl"
        t0 = time.perf_counter()
        with base_path.open("ab") as f:
            buf: list[bytes] = []
            for i in range(n):
                buf.append(orjson.dumps(_entry(i, None).to_fields()) + b"\n")
                if len(buf) >= 512:
                    f.write(b"".join(buf))
                    buf.clear()
            f.write(b"".join(buf))
        result["baseline_plain_append_records_per_s"] = round(n / (time.perf_counter() - t0))
        for mode, content in [
            ("none", None),
            ("redacted", {"messages": [{"role": "user", "content": "电话13800138000，请回电"}]}),
            ("full", {"messages": [{"role": "user", "content": "hello " * 20}]}),
        ]:
            log = AuditLog(Path(tmp) / mode, key, checkpoint_every=1000, retention=mode)
            t0 = time.perf_counter()
            for i in range(n):
                log.append(_entry(i, content), ts=1.767e9 + i * 0.001)
            log.close()
            result[f"chained_{mode}_records_per_s"] = round(n / (time.perf_counter() - t0))
    result["target_records_per_s"] = 20_000
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 50 if args.quick else 400
    n = 5_000 if args.quick else 50_000
    report = {
        "bench": "governance",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()} {platform.python_implementation()} "
        f"{platform.python_version()}",
        "pii_scan": pii_scan(repeat),
        "injection_screen": injection_screen(repeat // 4),
        "stream_restore": stream_restore(repeat // 4),
        "audit_append": audit_append(n),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
