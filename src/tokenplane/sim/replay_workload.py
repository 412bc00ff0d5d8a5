"""The workload of recorded traffic: one ``ReplayRequest`` per request of the ledger.

Built from each request's last attempt (``metering.request_history.last_attempts``):
when it arrived, who sent it (tenant / department / app / key / end user), which model
alias and SLO class, its prompt tokens by source, its output tokens and the prompt's
prefix fingerprints (the router's chained segment hashes, ledger column
``prefix_segments``). No prompt text exists in the ledger, so none leaves it.

Also the Mooncake-like JSONL export that ``tokenplane simulate`` reads
(``sim/traces.load_mooncake_jsonl``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import orjson

from tokenplane.metering.events import UsageEvent
from tokenplane.routing.gateway.prompt_blocks import blocks_of_runs
from tokenplane.sim.traces import MOONCAKE_BLOCK_TOKENS

# error codes of the gateway's own admission refusals (its 429s; docs/ADMISSION.md)
ADMISSION_CODES = frozenset({"rate_limit_exceeded", "budget_exceeded",
                             "concurrency_limit_exceeded", "request_exceeds_limit"})
SOURCES = ("system", "history", "context", "tools", "user")


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """One recorded request, as replay needs it (``event``: its last attempt)."""

    event: UsageEvent
    arrival: float  # epoch seconds
    segments: tuple[tuple[int, int], ...]  # (segment hash, blocks)

    @property
    def request_id(self) -> str:
        return self.event.request_id

    @property
    def refused(self) -> bool:
        """The gateway refused it at admission (a limit or a budget)."""
        e = self.event
        return e.http_status == 429 and (e.error_code or "") in ADMISSION_CODES

    @property
    def reached_upstream(self) -> bool:
        return self.event.upstream_start_ts is not None

    @property
    def prompt_tokens(self) -> int:
        """The prompt as the gateway counted it at admission (a refused request has no
        upstream count)."""
        e = self.event
        return e.input_tokens if e.input_tokens else e.estimated_input_tokens

    @property
    def duration(self) -> float:
        return max(0.0, self.event.ts - self.arrival)

    def block_hashes(self) -> tuple[int, ...]:
        return tuple(blocks_of_runs(self.segments)) if self.segments else ()


def parse_segments(text: str | None) -> tuple[tuple[int, int], ...]:
    """The ledger's ``prefix_segments`` column back as ``((hash, blocks), ...)``;
    empty for events recorded without one (or a malformed value)."""
    if not text:
        return ()
    try:
        raw = orjson.loads(text)
        return tuple((int(h), int(n)) for h, n in raw if int(n) > 0)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return ()


def workload_from_events(
    events: Iterable[UsageEvent], tenant: str | None = None
) -> list[ReplayRequest]:
    """Recorded requests in arrival order (only ``tenant``'s when given)."""
    out = [
        ReplayRequest(e, e.arrival_ts if e.arrival_ts is not None else e.ts,
                      parse_segments(e.prefix_segments))
        for e in events
        if tenant is None or e.tenant == tenant
    ]
    out.sort(key=lambda r: (r.arrival, r.request_id))
    return out


def mooncake_lines(workload: Sequence[ReplayRequest], block_size: int = 16) -> Iterator[bytes]:
    """The workload as Mooncake-like JSONL: ``timestamp`` (ms from the first arrival),
    ``input_length``, ``output_length``, ``hash_ids`` (one id per 512-token block).

    A 512-token block's id stands for the chained hash of its last full router block
    (chained: equal ids mean equal prefixes; a last, partial block counts too, as in
    Mooncake's traces), renumbered 0, 1, 2, ... in order of first appearance so that
    no hash leaves. Requests recorded as refused are left out (they
    produced nothing); extra keys (``tenant``, ``slo_class``, ``model``) are ignored by
    the loader. ``block_size``: the gateway's router block (``routing.block_size``)."""
    ids: dict[int, int] = {}
    t0 = workload[0].arrival if workload else 0.0
    for r in workload:
        if r.refused or not r.reached_upstream:
            continue
        blocks = r.block_hashes()
        per = max(1, MOONCAKE_BLOCK_TOKENS // block_size)
        ends = list(range(per, len(blocks) + 1, per))
        if len(blocks) % per:
            ends.append(len(blocks))  # the last, partial 512 tokens
        hash_ids = [ids.setdefault(blocks[end - 1], len(ids)) for end in ends]
        e = r.event
        yield orjson.dumps({
            "timestamp": round((r.arrival - t0) * 1000.0, 3),
            "input_length": max(1, r.prompt_tokens),
            "output_length": max(1, e.output_tokens),
            "hash_ids": hash_ids,
            "tenant": e.tenant, "model": e.model, "slo_class": e.slo_class,
        }) + b"\n"


def token_sources(event: UsageEvent) -> dict[str, int]:
    """The recorded prompt by source and the other token counts of one event."""
    return {
        "system": event.input_system, "history": event.input_history,
        "context": event.input_context, "tools": event.input_tools,
        "user": event.input_user, "cached": event.cached_input_tokens,
        "output": event.output_tokens, "reasoning": event.reasoning_tokens,
    }
