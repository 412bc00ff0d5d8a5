"""The tracing finisher: an OpenTelemetry span for each request, with GenAI
semantic-convention attribute names.

The span is made after the fact by a finisher, from the timings already on the request
context (arrival, upstream start, first and last token): nothing runs on the request
path, and when no OTLP endpoint is configured no finisher is installed at all. A W3C
``traceparent`` sent by the client becomes the span's parent.

Attributes: ``gen_ai.operation.name``, ``gen_ai.request.model`` (the alias),
``gen_ai.response.model``, ``gen_ai.request.max_tokens``, ``gen_ai.usage.input_tokens``,
``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
``gen_ai.usage.reasoning.output_tokens``, ``gen_ai.response.time_to_first_token``
(seconds), ``server.address`` (the replica), ``http.response.status_code``,
``error.type``, and ``tokenplane.*``: ``request_id``, ``tenant``, ``department``,
``app``, ``usage_source``, ``stream``, ``attempts``, ``status``, ``input_tokens.<source>``.
Keys and end users are never attributes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from tokenplane.config.schema import ModelConfig
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.meter_stage import settled_counts


def _ns(t: float) -> int:
    return int(t * 1e9)


class SpanFinisher:
    """Emits one SERVER span per finished request (after the meter settled its counts)."""

    def __init__(self, tracer: Tracer, count_text: Callable[[ModelConfig, str], int],
                 clock: Callable[[], float] = time.time) -> None:
        self.tracer = tracer
        self.count_text = count_text
        self.clock = clock

    async def finish(self, ctx: RequestContext) -> None:
        end = self.clock()
        op = ctx.operation.name
        alias = ctx.alias or ""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": op,
            "tokenplane.request_id": ctx.request_id,
            "tokenplane.status": ctx.status,
            "tokenplane.stream": ctx.stream,
            "http.response.status_code": ctx.http_status,
        }
        if alias:
            attrs["gen_ai.request.model"] = alias
        if ctx.max_tokens is not None:
            attrs["gen_ai.request.max_tokens"] = ctx.max_tokens
        p = ctx.principal
        if p is not None:
            attrs["tokenplane.tenant"] = p.tenant
            if p.department:
                attrs["tokenplane.department"] = p.department
            if p.app:
                attrs["tokenplane.app"] = p.app
        if ctx.response_model:
            attrs["gen_ai.response.model"] = ctx.response_model
        if ctx.endpoint is not None:
            attrs["server.address"] = ctx.endpoint.id
        if ctx.model is not None:
            c = settled_counts(ctx, self.count_text)
            attrs["gen_ai.usage.input_tokens"] = c.prompt
            attrs["gen_ai.usage.output_tokens"] = c.output
            attrs["gen_ai.usage.cache_read.input_tokens"] = c.cached
            attrs["gen_ai.usage.reasoning.output_tokens"] = c.reasoning
            attrs["tokenplane.usage_source"] = ctx.usage_source
            attrs["tokenplane.attempts"] = ctx.attempt + 1
            for source in ("system", "history", "context", "tools", "user"):
                attrs[f"tokenplane.input_tokens.{source}"] = getattr(c, source)
        if ctx.first_token is not None:
            attrs["gen_ai.response.time_to_first_token"] = ctx.first_token - ctx.arrival
        if ctx.error_code:
            attrs["error.type"] = ctx.error_code
        name = f"{op} {alias}" if alias else op
        parent = extract(ctx.headers) if "traceparent" in ctx.headers else None
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.SERVER,
                                      attributes=attrs, start_time=_ns(ctx.arrival))
        if ctx.upstream_start is not None:
            span.add_event("upstream.start", timestamp=_ns(ctx.upstream_start))
        if ctx.first_token is not None:
            span.add_event("gen_ai.first_token", timestamp=_ns(ctx.first_token))
        if ctx.status == "error":
            span.set_status(Status(StatusCode.ERROR, ctx.error_code or "error"))
        span.end(end_time=_ns(max(end, ctx.arrival)))
