"""Parse an engine's Prometheus text (vLLM old and new names, SGLang) into one shape."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenplane.routing.endpoint import EndpointState


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    """The engine-reported figures routing uses; None when the engine did not say."""

    num_running: int | None = None
    num_waiting: int | None = None
    kv_usage: float | None = None
    prefix_queries: float | None = None
    prefix_hits: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    flavour: str = "unknown"

    def apply_to(self, state: EndpointState) -> EndpointState:
        """``state`` with the engine-reported figures this scrape knows replaced."""
        return replace(
            state,
            num_running=state.num_running if self.num_running is None else self.num_running,
            num_waiting=state.num_waiting if self.num_waiting is None else self.num_waiting,
            kv_usage=state.kv_usage if self.kv_usage is None else self.kv_usage,
        )

    @property
    def prefix_hit_rate(self) -> float | None:
        if self.prefix_queries is None or self.prefix_hits is None or self.prefix_queries <= 0:
            return None
        return self.prefix_hits / self.prefix_queries


# metric name (without _total) -> field; summed over label sets
_NAMES: dict[str, str] = {
    "vllm:num_requests_running": "num_running",
    "vllm:num_requests_waiting": "num_waiting",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:gpu_cache_usage_perc": "kv_usage",
    "vllm:prefix_cache_queries": "prefix_queries",
    "vllm:prefix_cache_hits": "prefix_hits",
    "vllm:gpu_prefix_cache_queries": "prefix_queries",
    "vllm:gpu_prefix_cache_hits": "prefix_hits",
    "vllm:num_preemptions": "preemptions_total",
    "vllm:prompt_tokens": "prompt_tokens_total",
    "vllm:generation_tokens": "generation_tokens_total",
    "sglang:num_running_reqs": "num_running",
    "sglang:num_queue_reqs": "num_waiting",
    "sglang:token_usage": "kv_usage",
    "sglang:prompt_tokens": "prompt_tokens_total",
    "sglang:generation_tokens": "generation_tokens_total",
}
_PREFERRED = {"vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits"}


def _split_sample(line: str) -> tuple[str, float] | None:
    """(metric name, value) of one sample line, or None if it is not one."""
    brace = line.find("{")
    if brace >= 0:
        name = line[:brace]
        close = line.rfind("}")
        if close < brace:
            return None
        rest = line[close + 1 :].split()
    else:
        parts = line.split()
        if len(parts) < 2:
            return None
        name, rest = parts[0], parts[1:]
    if not rest:
        return None
    try:
        value = float(rest[0])
    except ValueError:
        return None
    if math.isnan(value):
        return None
    return name.strip(), value


def parse_engine_metrics(text: str) -> EngineMetrics:
    """Read the figures routing needs from a ``/metrics`` page; unknown lines are ignored.

    Counters may carry the ``_total`` suffix or not. Several label sets of one
    metric (e.g. per model) are summed. When both the new and the older vLLM
    name are present the new one wins.
    """
    sums: dict[str, float] = {}
    source: dict[str, str] = {}
    flavour = "unknown"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        sample = _split_sample(line)
        if sample is None:
            continue
        name, value = sample
        base = name[:-6] if name.endswith("_total") else name
        fld = _NAMES.get(base)
        if fld is None:
            continue
        flavour = base.split(":", 1)[0]
        prev = source.get(fld)
        if prev is not None and prev != base:
            if prev in _PREFERRED:
                continue
            if base in _PREFERRED:
                sums.pop(fld, None)
        source[fld] = base
        sums[fld] = sums.get(fld, 0.0) + value

    def as_int(key: str) -> int | None:
        v = sums.get(key)
        return None if v is None else round(v)

    return EngineMetrics(
        num_running=as_int("num_running"),
        num_waiting=as_int("num_waiting"),
        kv_usage=sums.get("kv_usage"),
        prefix_queries=sums.get("prefix_queries"),
        prefix_hits=sums.get("prefix_hits"),
        preemptions_total=sums.get("preemptions_total"),
        prompt_tokens_total=sums.get("prompt_tokens_total"),
        generation_tokens_total=sums.get("generation_tokens_total"),
        flavour=flavour,
    )
