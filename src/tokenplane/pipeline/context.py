"""The one request object that flows through every stage of the token path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenplane.admission.ticket import Ticket
from tokenplane.auth.principal import Principal
from tokenplane.cache.billing import HitCharge
from tokenplane.cache.hits import CacheFill, CacheHit
from tokenplane.config.schema import ModelConfig
from tokenplane.context.documents import Packed
from tokenplane.governance.guard_state import GuardState
from tokenplane.operations.base import Operation
from tokenplane.pipeline.context_use import OverflowUse
from tokenplane.pipeline.relayed import RelayedText
from tokenplane.pipeline.route_info import RouteInfo
from tokenplane.sessions.step import SessionStep
from tokenplane.tokens.counts import TokenCounts
from tokenplane.upstream.pool import Endpoint, Pool


class PromptCount(Protocol):
    """A request's prompt tokens by source, as the tokens stage counts them."""

    counts: TokenCounts
    system_fingerprint: str | None
    exact: bool
    flags: frozenset[str]
    longest: int | None  # a batch of prompts: the longest one (what must fit the window)


@dataclass(frozen=True, slots=True)
class EarlyCount:
    """A large prompt counted before the input guard (``pipeline/stages.EarlyCountStage``):
    the body's prompt and tools it was counted from, and the count. The tokens stage
    takes it while the body still holds these very objects (the guard left them)."""

    prompt: object
    tools: object
    result: PromptCount


class StreamGuard(Protocol):
    """Enforces a budget during a stream (admission installs one on the context).

    ``covered`` output tokens may be forwarded; the relay calls :meth:`extend`
    before forwarding a token beyond them, and ends the stream when it says no.
    """

    covered: int

    async def extend(self, produced: int) -> bool: ...

    def end_note(self) -> dict[str, Any]: ...


class ClientLink(Protocol):
    """The client's connection as the pipeline sees it (the HTTP front implements it):
    whether the client has gone, and one callback run when it goes (``None`` clears
    it). ``stalled``: it was ended because the client read nothing for too long."""

    @property
    def gone(self) -> bool: ...

    @property
    def stalled(self) -> bool: ...

    def on_gone(self, callback: Callable[[], None] | None) -> None: ...


@dataclass(slots=True)
class RequestContext:
    request_id: str
    path: str
    operation: Operation  # the endpoint kind (operations/registry.py, by path)
    raw: bytes
    headers: Mapping[str, str]
    body: dict[str, Any] = field(default_factory=dict)
    arrival: float = field(default_factory=time.time)
    principal: Principal | None = None
    alias: str | None = None
    requested_model: str | None = None  # the name the client sent, when model_map changed it
    model: ModelConfig | None = None
    pool: Pool | None = None
    endpoint: Endpoint | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    predicted_output: int = 0
    counts: TokenCounts = field(default_factory=TokenCounts)
    estimated_input_tokens: int = 0
    system_fingerprint: str | None = None
    attempt: int = 0
    # timings (epoch seconds)
    queue_wait: float | None = None  # seconds waited in the gateway's scheduler queue
    upstream_start: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    # outcome
    usage: dict[str, Any] | None = None
    usage_source: str = "upstream"
    relayed: RelayedText | None = None  # a stream's content sent to the client (its text)
    chunks: int = 0
    response_model: str | None = None
    finish_reason: str | None = None  # the upstream's ("length" if any choice hit it)
    status: str = "ok"
    http_status: int = 200
    error_code: str | None = None
    flags: list[str] = field(default_factory=list)
    # what the stages decided, each set by one stage and read by the later ones
    slo_class: str | None = None  # the scheduler's SLO class name
    route: RouteInfo | None = None  # the routing decision (route stage)
    model_version: str | None = None  # the version of the replica that served it
    ticket: Ticket | None = None  # the admission reservation, until it is settled
    guard: GuardState | None = None  # what the input guard decided (governance on)
    input_features: dict[str, int] | None = None  # estimator features (no tokenizer)
    response_text: tuple[str, str] | None = None  # (text, reasoning) of a usage-less answer
    response_headers: dict[str, str] = field(default_factory=dict)  # sent on any answer
    stream_guard: StreamGuard | None = None
    final: tuple[int, TokenCounts] | None = None  # (attempt, final counts), computed once
    client: ClientLink | None = None  # the client's connection, when the front serves it
    early_count: EarlyCount | None = None  # a large prompt counted before the input guard
    # RAG context and overflow (pipeline/context_stage.py, pipeline/overflow.py)
    packed: Packed | None = None  # the documents packed into the prompt
    # the packed documents' deferred accounting (Packed.settle on a worker thread);
    # awaited before the answer's body and the ledger read it
    settling: asyncio.Future[Any] | None = None
    pinned: frozenset[int] = frozenset()  # messages history trimming keeps
    overflow: OverflowUse | None = None  # what the overflow policy did
    reply_extra: dict[str, Any] | None = None  # added to a whole answer as "tokenplane"
    session: SessionStep | None = None  # the agent session and step (session stage)
    tool_calls: int = 0  # tool calls in the answer (every choice)
    cache_hit: CacheHit | None = None  # the cached answer served (pipeline/cache_stage.py)
    cache_fill: CacheFill | None = None  # where a cache miss's answer is stored
    cache_charge: HitCharge | None = None  # what the hit is billed, computed once

    @property
    def tenant(self) -> str | None:
        return self.principal.tenant if self.principal else None
