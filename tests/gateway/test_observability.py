"""Prometheus metrics (cost, tokens, ledger, estimator and predictor errors, configurable
principal labels) and OpenTelemetry spans with GenAI attribute names."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web
from openai import AsyncOpenAI
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.compose.config_file import ConfigError, validate_config
from tokenplane.observe.tracing import traces_url
from tokenplane.pipeline.tracing_stage import SpanFinisher
from tokenplane.tokens.predictor import LengthKey, Prediction

MODEL = "sim-llama3-8b"
SYSTEM = "You are an exacting assistant that audits invoices line by line. " * 20
MSGS = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "audit this"}]


def _samples(gw: GatewayThread) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = httpx.get(gw.metrics_url, timeout=10).text
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


async def _traffic(gw: GatewayThread, key: str, n: int, **kw: Any) -> list[str]:
    client = AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    ids = []
    for i in range(n):
        if i % 2:
            async with client.chat.completions.with_streaming_response.create(
                model=MODEL, messages=MSGS, max_tokens=10, stream=True, **kw
            ) as resp:
                ids.append(resp.headers["x-request-id"])
                async for _ in resp.iter_lines():
                    pass
        else:
            raw = await client.chat.completions.with_raw_response.create(
                model=MODEL, messages=MSGS, max_tokens=10, **kw)
            ids.append(raw.headers["x-request-id"])
    await client.close()
    return ids


def test_metrics_cost_tokens_ledger_and_predictor(tmp_path: Path) -> None:
    cfg = sim_config(replicas=1)
    cfg["observe"] = {"labels": ["tenant", "app"]}
    gw = GatewayThread(cfg, tmp_path).start()
    key = gw.create_key("acme", department="eng", app="audit")
    asyncio.run(_traffic(gw, key, 20))
    samples = _samples(gw)
    gw.stop()
    rows = gw.ledger_rows()
    cost = samples["tokenplane_cost_micros_total"]
    assert [labels for labels, _ in cost] == [
        {"model": MODEL, "currency": "USD", "tenant": "acme", "app": "audit"}]
    assert cost[0][1] == sum(r["cost_micros"] for r in rows) > 0
    tokens = {lb["kind"]: v for lb, v in samples["tokenplane_tokens_total"]}
    assert tokens["system"] == sum(r["input_system"] for r in rows)
    assert tokens["cached"] == sum(r["cached_input_tokens"] for r in rows) > 0
    assert tokens["output"] == sum(r["output_tokens"] for r in rows)
    for name in ("tokenplane_requests_total", "tokenplane_tokens_total"):
        for labels, _ in samples[name]:
            assert "key" not in labels and "key_id" not in labels and "department" not in labels
    assert samples["tokenplane_ledger_journaled_total"][0][1] == 20
    assert samples["tokenplane_ledger_committed_total"][0][1] == 20
    assert samples["tokenplane_ledger_sink_errors_total"][0][1] == 0
    assert "tokenplane_ledger_lag_events" in samples
    assert samples["tokenplane_predictor_error_ratio_samples"][0][1] == 20
    assert samples["tokenplane_predictor_error_ratio"][0][1] >= 0
    outputs = sorted(r["output_tokens"] for r in rows)
    prompt = rows[0]["input_tokens"]
    assert gw.gateway.predictor.quantile(LengthKey("acme", "audit", MODEL), prompt, 0.5) == \
        Prediction(outputs[len(outputs) // 2], "key+bucket", 20)


@pytest.mark.parametrize("labels", [["key"], ["end_user"], ["tenant", "tenant"]])
def test_unbounded_or_repeated_labels_are_refused(labels: list[str]) -> None:
    cfg = sim_config()
    cfg["observe"] = {"labels": labels}
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert any(line.startswith("observe.labels") for line in err.value.errors)


def test_span_has_genai_attributes(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    assert gw.gateway.tracing is None  # no endpoint: no span finisher on the path
    assert not any(isinstance(f, SpanFinisher) for f in gw.gateway.pipeline.finishers)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gw.gateway.pipeline.finishers.append(SpanFinisher(
        provider.get_tracer("test"), gw.gateway.counters.count_text, time.time))
    key = gw.create_key("acme", department="eng", app="spans")
    ids = asyncio.run(_traffic(gw, key, 2, reasoning_effort="low"))

    async def bad() -> None:
        client = AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(
                model=MODEL, messages=MSGS, max_tokens=10, extra_headers={
                    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
                extra_body={"max_tokens": 999_999})
        await client.close()

    asyncio.run(bad())
    gw.stop()
    rows = {r["request_id"]: r for r in gw.ledger_rows()}
    spans = {s.attributes["tokenplane.request_id"]: s for s in exporter.get_finished_spans()}
    assert len(spans) == 3
    for rid in ids:
        span, row = spans[rid], rows[rid]
        a = span.attributes
        assert span.name == f"chat {MODEL}" and span.kind == SpanKind.SERVER
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.request.model"] == MODEL
        assert a["gen_ai.response.model"] == row["response_model"]
        assert a["gen_ai.usage.input_tokens"] == row["input_tokens"]
        assert a["gen_ai.usage.output_tokens"] == row["output_tokens"]
        assert a["gen_ai.usage.cache_read.input_tokens"] == row["cached_input_tokens"]
        assert a["gen_ai.usage.reasoning.output_tokens"] == row["reasoning_tokens"] > 0
        assert a["tokenplane.tenant"] == "acme" and a["tokenplane.app"] == "spans"
        assert a["tokenplane.input_tokens.system"] == row["input_system"]
        assert span.start_time == int(row["arrival_ts"] * 1e9)
        assert span.end_time >= span.start_time
        first = ["gen_ai.first_token"] if row["stream"] else []
        assert [e.name for e in span.events] == ["upstream.start", *first]
        assert not any("key" in k for k in a)
    assert spans[ids[1]].attributes["tokenplane.stream"] is True
    failed = next(s for rid, s in spans.items() if rid not in ids)
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["http.response.status_code"] == 400
    assert failed.parent is not None
    assert failed.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C


class _Collector:
    """An OTLP/HTTP receiver on a real port: keeps the protobuf bodies it is sent."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[bytes] = []
        self.got = threading.Event()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    async def _traces(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        self.got.set()
        return web.Response(body=b"", content_type="application/x-protobuf")

    def start(self) -> _Collector:
        self._thread.start()

        async def up() -> None:
            app = web.Application()
            app.router.add_post("/v1/traces", self._traces)
            self._runner = web.AppRunner(app, handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def test_spans_exported_over_otlp_when_configured(tmp_path: Path) -> None:
    assert traces_url("http://c:4318/") == "http://c:4318/v1/traces"
    collector = _Collector().start()
    cfg = sim_config(replicas=1)
    cfg["observe"] = {"otlp_endpoint": f"http://127.0.0.1:{collector.port}",
                      "service_name": "tp-test"}
    gw = GatewayThread(cfg, tmp_path).start()
    assert gw.gateway.tracing is not None
    key = gw.create_key("acme", app="otlp")
    ids = asyncio.run(_traffic(gw, key, 3))
    gw.stop()  # shuts the provider down: the batch is flushed
    assert collector.got.is_set()
    collector.stop()
    spans: dict[str, dict[str, Any]] = {}
    services = set()
    for body in collector.bodies:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes
                         if a.key == "service.name"}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {a.key: a.value for a in span.attributes}
                    spans[attrs["tokenplane.request_id"].string_value] = attrs
    assert services == {"tp-test"}
    assert set(spans) == set(ids)
    for attrs in spans.values():
        assert attrs["gen_ai.request.model"].string_value == MODEL
        assert attrs["gen_ai.usage.input_tokens"].int_value > 0
        assert attrs["tokenplane.tenant"].string_value == "acme"
