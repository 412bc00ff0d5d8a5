"""OpenTelemetry: the OTLP/HTTP tracer provider (batched export, or none when no
endpoint is configured). The spans themselves are made by the tracing finisher,
``pipeline/tracing_stage.py``, which documents their attributes."""

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

