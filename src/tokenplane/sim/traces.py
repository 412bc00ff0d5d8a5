"""Trace loaders (Azure LLM inference CSV, Mooncake JSONL) and load scaling."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

MOONCAKE_BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: when it arrived and how big it was."""

    arrival: float
    prompt_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()


def load_azure_csv(path: str | Path) -> list[TraceRequest]:
    """Azure LLM inference 2023 (vidur's processed form):
    ``arrived_at,num_prefill_tokens,num_decode_tokens``."""
    out: list[TraceRequest] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out.append(
                TraceRequest(
                    arrival=float(row["arrived_at"]),
                    prompt_tokens=max(1, int(row["num_prefill_tokens"])),
                    output_tokens=max(1, int(row["num_decode_tokens"])),
                )
            )
    out.sort(key=lambda r: r.arrival)
    return out


class _HashExpander:
    """Expands Mooncake 512-token block ids into engine-sized block hashes.

    Mooncake's ids are prefix-chained (an id at position i implies the whole
    prefix before it), so the engine block ``j`` inside Mooncake block ``h`` is
    given the hash ``h * k + j`` (``k = 512 / block_size``): equal engine hashes
    mean equal prefixes, which is what a chained hash guarantees. Expansions are
    memoised so requests sharing a prefix share the int objects.
    """

    def __init__(self, block_size: int) -> None:
        if block_size <= 0 or MOONCAKE_BLOCK_TOKENS % block_size:
            raise ValueError(f"block_size must divide {MOONCAKE_BLOCK_TOKENS}")
        self.per = MOONCAKE_BLOCK_TOKENS // block_size
        self._memo: dict[int, tuple[int, ...]] = {}

    def expand(
        self, hash_ids: Sequence[int], input_length: int, block_size: int
    ) -> tuple[int, ...]:
        full = input_length // block_size
        out: list[int] = []
        for h in hash_ids:
            blk = self._memo.get(h)
            if blk is None:
                base = (h + 1) * self.per
                blk = tuple(range(base, base + self.per))
                self._memo[h] = blk
            out.extend(blk)
            if len(out) >= full:
                break
        return tuple(out[:full])


def load_mooncake_jsonl(path: str | Path, block_size: int = 16) -> list[TraceRequest]:
    """Mooncake conversation trace: ``timestamp`` (ms), ``input_length``,
    ``output_length``, ``hash_ids`` (one per 512-token block)."""
    exp = _HashExpander(block_size)
    out: list[TraceRequest] = []
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            d = json.loads(line)
            n_in = max(1, int(d["input_length"]))
            out.append(
                TraceRequest(
                    arrival=float(d["timestamp"]) / 1000.0,
                    prompt_tokens=n_in,
                    output_tokens=max(1, int(d["output_length"])),
                    block_hashes=exp.expand(d.get("hash_ids", ()), n_in, block_size),
                )
            )
    out.sort(key=lambda r: r.arrival)
    return out


def load_trace(path: str | Path, block_size: int = 16) -> list[TraceRequest]:
    """Pick the loader by file extension (``.csv`` Azure, ``.jsonl`` Mooncake)."""
    p = Path(path)
    if p.suffix == ".csv":
        return load_azure_csv(p)
    if p.suffix in (".jsonl", ".json"):
        return load_mooncake_jsonl(p, block_size)
    raise ValueError(f"unknown trace format {p.suffix!r}: expected .csv or .jsonl")


def slice_trace(
    reqs: Sequence[TraceRequest], start_s: float = 0.0, duration_s: float | None = None
) -> list[TraceRequest]:
    """Requests arriving in ``[start_s, start_s + duration_s)``, re-based to start at 0."""
    end = float("inf") if duration_s is None else start_s + duration_s
    return [replace(r, arrival=r.arrival - start_s) for r in reqs if start_s <= r.arrival < end]


def scale_load(reqs: Sequence[TraceRequest], factor: float) -> list[TraceRequest]:
    """Compress time by ``factor`` (2.0 = twice the request rate)."""
    if factor <= 0:
        raise ValueError("load factor must be positive")
    return [replace(r, arrival=r.arrival / factor) for r in reqs]


def trace_span_s(reqs: Sequence[TraceRequest]) -> float:
    """Seconds from the first to the last arrival (at least 1 ms)."""
    if not reqs:
        return 0.0
    return max(1e-3, reqs[-1].arrival - reqs[0].arrival)
