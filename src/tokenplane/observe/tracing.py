"""OpenTelemetry: the OTLP tracer provider the tracing finisher (``pipeline/tracing_stage``)
exports spans through.

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

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tokenplane.config.schema import ObserveConfig

TRACER_NAME = "tokenplane.gateway"


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP collector base URL (``http://host:4318``) to its traces URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def otlp_provider(cfg: ObserveConfig) -> TracerProvider | None:
    """A tracer provider exporting over OTLP/HTTP in batches, or None when no endpoint is
    configured (tracing off)."""
    if cfg.otlp_endpoint is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}))
    exporter = OTLPSpanExporter(endpoint=traces_url(cfg.otlp_endpoint),
                                headers=dict(cfg.otlp_headers) or None)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider

