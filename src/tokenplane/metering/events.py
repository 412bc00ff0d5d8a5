"""The usage event: one record per upstream attempt, the unit of the ledger.

The gateway builds one ``UsageEvent`` per attempt it sends upstream (a retry or a
fallback is a new attempt of the same request) and hands it to ``Meter.record``.
``(request_id, attempt)`` is the event's identity: the ledger stores it once, however
many times a journal is replayed. Field names map to OpenTelemetry GenAI attributes
as documented in ``docs/LEDGER.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from tokenplane.tokens.counts import TokenCounts

STATUSES = ("ok", "error", "cancelled")
USAGE_SOURCES = ("upstream", "estimated")


@dataclass(slots=True)
class UsageEvent:
    """Usage of one upstream attempt. Token fields are counts, never estimates of cost."""

    request_id: str
    attempt: int
    ts: float  # epoch seconds at the end of the attempt
    tenant: str = ""
    department: str = ""
    app: str = ""
    key_id: str = ""
    end_user: str = ""
    model: str = ""  # gen_ai.request.model (the alias the client asked for)
    backend: str = ""
    response_model: str = ""  # gen_ai.response.model
    operation: str = "chat"
    status: str = "ok"
    http_status: int = 200
    error_code: str | None = None
    stream: bool = False
    arrival_ts: float | None = None
    upstream_start_ts: float | None = None
    first_token_ts: float | None = None
    last_token_ts: float | None = None
    input_system: int = 0
    input_history: int = 0
    input_context: int = 0
    input_tools: int = 0
    input_user: int = 0
    input_tokens: int = 0  # whole prompt, cached and cache-written parts included
    cached_input_tokens: int = 0  # subset of input_tokens read from the prefix cache
    cache_write_tokens: int = 0  # subset of input_tokens written to a provider cache
    output_tokens: int = 0  # reasoning included
    reasoning_tokens: int = 0  # subset of output_tokens
    estimated_input_tokens: int = 0  # the gateway's own count of the prompt
    usage_source: str = "upstream"
    cost_micros: int = 0
    currency: str = "USD"
    price_version: str = ""
    flags: list[str] = field(default_factory=list)
    model_version: str | None = None
    system_fingerprint: str | None = None
    slo_class: str | None = None  # the scheduler's SLO class (None: not scheduled)
    # the prompt's prefix fingerprints, JSON [[segment hash, blocks], ...]: the router's
    # chained hash of each content segment and how many full blocks it spans (replay)
    prefix_segments: str | None = None
    # RAG context packing (offered == kept + dropped: the documents' own tokens) and the
    # overflow policy (docs/CONTEXT.md); JSON {reason: {"documents", "tokens"}}
    context_offered_tokens: int = 0
    context_kept_tokens: int = 0
    context_dropped_tokens: int = 0
    context_dropped: str | None = None
    history_dropped_messages: int = 0
    history_dropped_tokens: int = 0
    overflow: str | None = None  # "trim_history" | "fallback"
    overflow_from: str | None = None  # the alias asked for, on a fallback
    # agent sessions (docs/SESSIONS.md): the session and step the request named (or the
    # step the gateway numbered), tool calls in the answer, tool-result tokens in the
    # prompt, those added since the previous step, and those a tool-output policy removed
    session_id: str | None = None
    session_step: int | None = None
    tool_calls: int = 0
    tool_output_tokens: int = 0
    tool_output_added: int = 0
    tool_output_removed: int = 0
    # a response-cache hit (docs/CACHE.md): its kind (exact | semantic; None: not a
    # hit), the request whose answer was served, and what it saved: the tokens not sent
    # upstream and their list price less what the hit was billed (cost_micros)
    cache: str | None = None
    cache_source_request_id: str | None = None
    saved_input_tokens: int = 0
    saved_output_tokens: int = 0
    saved_cost_micros: int = 0
    queue_wait_s: float | None = None  # time waited in the gateway's scheduler queue
    # the upstream's finish_reason of the answer (first choice that ended; "length" if
    # any choice hit max_tokens), None when none came back (migration 10, the advisor)
    finish_reason: str | None = None
    # of cache_write_tokens, those written to a 1-hour prompt cache (migration 11)
    cache_write_1h_tokens: int = 0
    client: str | None = None  # the User-Agent's product (migration 11)

    @classmethod
    def from_counts(
        cls, request_id: str, attempt: int, ts: float, counts: TokenCounts, **attrs: Any
    ) -> UsageEvent:
        """Build an event whose token fields come from a ``TokenCounts``."""
        return cls(
            request_id=request_id,
            attempt=attempt,
            ts=ts,
            input_system=counts.system,
            input_history=counts.history,
            input_context=counts.context,
            input_tools=counts.tools,
            input_user=counts.user,
            input_tokens=counts.prompt,
            cached_input_tokens=counts.cached,
            output_tokens=counts.output,
            reasoning_tokens=counts.reasoning,
            **attrs,
        )

    def token_counts(self) -> TokenCounts:
        return TokenCounts(
            system=self.input_system,
            history=self.input_history,
            context=self.input_context,
            tools=self.input_tools,
            user=self.input_user,
            cached=self.cached_input_tokens,
            output=self.output_tokens,
            reasoning=self.reasoning_tokens,
        )

    @property
    def key(self) -> tuple[str, int]:
        return (self.request_id, self.attempt)


EVENT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(UsageEvent))


def encode_event(event: UsageEvent) -> bytes:
    """Serialise to compact JSON (orjson handles slotted dataclasses natively)."""
    return orjson.dumps(event)


def event_from_dict(data: dict[str, Any]) -> UsageEvent:
    """Rebuild an event, ignoring keys this version does not know (forward compatible)."""
    known = {k: v for k, v in data.items() if k in _FIELD_SET}
    flags = known.get("flags")
    if flags is not None and not isinstance(flags, list):
        known["flags"] = list(flags)
    return UsageEvent(**known)


def decode_event(data: bytes) -> UsageEvent:
    loaded = orjson.loads(data)
    if not isinstance(loaded, dict):
        raise ValueError("usage event must be a JSON object")
    return event_from_dict(loaded)


_FIELD_SET = frozenset(EVENT_COLUMNS)
