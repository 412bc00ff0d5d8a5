"""vLLM-named Prometheus metrics of one simulated engine, in a registry of its own.

Gauges and counters are read from ``Engine.stats()`` at scrape time (a collector),
so they can never drift from the engine; latency histograms are observed by the
service as tokens are delivered. Counters are declared without the ``_total``
suffix, as vLLM declares them, so the exposition shows e.g.
``vllm:prompt_tokens_total`` and ``vllm:prefix_cache_queries_total``.

With a host-DRAM KV tier (profile ``host_kv_gib`` > 0) the engine also exposes
figures under names of our own (vLLM has no stable names for them):
``tokenplane_sim:host_prefix_cache_hits_total`` (prefix-hit tokens loaded from host
memory; included in ``vllm:prefix_cache_hits_total``),
``tokenplane_sim:host_kv_blocks_loaded_total`` and the gauge
``tokenplane_sim:host_kv_cache_usage_perc``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tokenplane.engine.core import Engine

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class _EngineCollector(Collector):
    def __init__(self, engine: Engine, model_name: str) -> None:
        self._engine = engine
        self._model = model_name

    def collect(self) -> Iterator[Metric]:
        s = self._engine.stats()
        labels = ["model_name"]
        values = [self._model]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric(values, value)
            return g

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric(values, value)
            return c

        yield gauge("vllm:num_requests_running", "Requests in the running batch.", s.num_running)
        yield gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.",
                    s.num_waiting)
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache usage; 1 means 100 percent.",
                    s.kv_usage)
        yield counter("vllm:prefix_cache_queries", "Prefix-cache queries, in tokens.",
                      s.prefix_queries)
        yield counter("vllm:prefix_cache_hits", "Prefix-cache hits, in tokens.", s.prefix_hits)
        if s.host_kv_blocks_total:
            yield counter("tokenplane_sim:host_prefix_cache_hits",
                          "Prefix-cache hits loaded from the host-DRAM KV tier, in tokens.",
                          s.host_prefix_hits)
            yield counter("tokenplane_sim:host_kv_blocks_loaded",
                          "KV blocks copied from host DRAM back to GPU memory.",
                          s.host_blocks_loaded_total)
            yield gauge("tokenplane_sim:host_kv_cache_usage_perc",
                        "Host-DRAM KV tier usage; 1 means 100 percent.",
                        s.host_kv_blocks_cached / s.host_kv_blocks_total)
        yield counter("vllm:num_preemptions", "Cumulative preemptions.", s.preemptions_total)
        yield counter("vllm:prompt_tokens", "Prefill tokens processed.", s.prompt_tokens_total)
        yield counter("vllm:generation_tokens", "Generation tokens processed.",
                      s.generation_tokens_total)


class EngineMetricsExporter:
    """The registry behind one service's /metrics."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_EngineCollector(engine, model_name))
        self._model = model_name
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Time to first token.", ["model_name"],
            buckets=TTFT_BUCKETS, registry=self.registry,
        ).labels(model_name)
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "Time between output tokens.", ["model_name"],
            buckets=ITL_BUCKETS, registry=self.registry,
        ).labels(model_name)
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "End-to-end request latency.", ["model_name"],
            buckets=E2E_BUCKETS, registry=self.registry,
        ).labels(model_name)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))
