"""Parsing vLLM (old and new names) and SGLang /metrics pages."""

from __future__ import annotations

import pytest

from tokenplane.routing.endpoint import EndpointState
from tokenplane.routing.engine_metrics import parse_engine_metrics

VLLM_NEW = """
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 7.0
vllm:num_requests_waiting{engine="0",model_name="llama"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.42
vllm:prefix_cache_queries_total{engine="0",model_name="llama"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="llama"} 250.0
vllm:num_preemptions_total{engine="0",model_name="llama"} 2.0
vllm:prompt_tokens_total{engine="0",model_name="llama"} 12345.0
vllm:generation_tokens_total{engine="0",model_name="llama"} 678.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="llama"} 4.0
"""

VLLM_OLD = """
vllm:num_requests_running{model_name="m"} 2
vllm:num_requests_waiting{model_name="m"} 0
vllm:gpu_cache_usage_perc{model_name="m"} 0.9
vllm:gpu_prefix_cache_queries_total{model_name="m"} 10
vllm:gpu_prefix_cache_hits_total{model_name="m"} 5
"""

SGLANG = """
sglang:num_running_reqs{model_name="qwen"} 12.0
sglang:num_queue_reqs{model_name="qwen"} 4.0
sglang:token_usage{model_name="qwen"} 0.61
"""


def test_vllm_new_names() -> None:
    m = parse_engine_metrics(VLLM_NEW)
    assert (m.num_running, m.num_waiting, m.flavour) == (7, 3, "vllm")
    assert m.kv_usage == pytest.approx(0.42)
    assert m.prefix_hit_rate == pytest.approx(0.25)
    assert m.preemptions_total == 2.0
    assert m.prompt_tokens_total == 12345.0 and m.generation_tokens_total == 678.0


def test_vllm_old_names() -> None:
    m = parse_engine_metrics(VLLM_OLD)
    assert (m.num_running, m.num_waiting) == (2, 0)
    assert m.kv_usage == pytest.approx(0.9)
    assert m.prefix_hit_rate == pytest.approx(0.5)


def test_new_name_wins_over_old_in_either_order() -> None:
    both = "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.3\n"
    assert parse_engine_metrics(both).kv_usage == pytest.approx(0.3)
    rev = "vllm:kv_cache_usage_perc 0.3\nvllm:gpu_cache_usage_perc 0.9\n"
    assert parse_engine_metrics(rev).kv_usage == pytest.approx(0.3)


def test_sglang() -> None:
    m = parse_engine_metrics(SGLANG)
    assert (m.num_running, m.num_waiting, m.flavour) == (12, 4, "sglang")
    assert m.kv_usage == pytest.approx(0.61)
    assert m.prefix_hit_rate is None


def test_label_sets_are_summed_and_junk_ignored() -> None:
    text = (
        'vllm:num_requests_running{model_name="a"} 1\n'
        'vllm:num_requests_running{model_name="b"} 2\n'
        "vllm:num_requests_waiting NaN\n"
        "garbage line\n"
        "vllm:num_requests_waiting{broken 3\n"
        "other_metric 5\n"
    )
    m = parse_engine_metrics(text)
    assert m.num_running == 3
    assert m.num_waiting is None
    assert parse_engine_metrics("").flavour == "unknown"


def test_apply_to_endpoint_state_keeps_unknown_fields() -> None:
    st = EndpointState("e1", num_running=1, num_waiting=1, kv_usage=0.1, inflight_requests=9)
    got = parse_engine_metrics(SGLANG).apply_to(st)
    assert (got.num_running, got.num_waiting, got.kv_usage) == (12, 4, 0.61)
    assert got.inflight_requests == 9 and got.id == "e1"
    same = parse_engine_metrics("").apply_to(st)
    assert same == st
