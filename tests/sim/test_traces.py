"""Trace loaders on the real files, load scaling, workload assignment."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tokenplane.sim.traces import (
    TraceRequest,
    load_mooncake_jsonl,
    load_trace,
    scale_load,
    slice_trace,
    trace_span_s,
)
from tokenplane.sim.workload import WorkloadRules, assign, zipf_weights

TRACES = Path("/work/shared/traces")
needs_traces = pytest.mark.skipif(not TRACES.exists(), reason="shared traces not present")


@needs_traces
def test_azure_conversation_trace() -> None:
    reqs = load_trace(TRACES / "azure_llm_2023_conv.csv")
    assert len(reqs) == 19366
    assert reqs[0].arrival == 0.0
    assert all(a.arrival <= b.arrival for a, b in itertools.pairwise(reqs))
    mean_prompt = sum(r.prompt_tokens for r in reqs) / len(reqs)
    mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
    assert 1100 < mean_prompt < 1200 and 190 < mean_out < 230
    assert 3400 < trace_span_s(reqs) < 3600
    assert all(r.block_hashes == () for r in reqs[:100])


@needs_traces
def test_azure_code_trace() -> None:
    reqs = load_trace(TRACES / "azure_llm_2023_code.csv")
    assert len(reqs) == 8819


def test_mooncake_hash_expansion(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 1500, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]}\n'
        '{"timestamp": 500, "input_length": 600, "output_length": 3, "hash_ids": [0, 7]}\n'
    )
    reqs = load_mooncake_jsonl(p, block_size=16)
    assert [r.arrival for r in reqs] == [0.5, 1.5]
    short, long_ = reqs
    assert len(long_.block_hashes) == 1100 // 16
    assert len(short.block_hashes) == 600 // 16
    # the first 512 tokens (32 blocks) are shared, the next block is not
    assert short.block_hashes[:32] == long_.block_hashes[:32]
    assert short.block_hashes[32] != long_.block_hashes[32]
    assert len(set(long_.block_hashes)) == len(long_.block_hashes)
    with pytest.raises(ValueError):
        load_mooncake_jsonl(p, block_size=24)


@needs_traces
def test_mooncake_real_file() -> None:
    reqs = load_trace(TRACES / "mooncake_conversation.jsonl", block_size=16)
    assert len(reqs) == 12031
    r = max(reqs[:50], key=lambda x: x.prompt_tokens)
    assert len(r.block_hashes) == r.prompt_tokens // 16
    # every request shares the first 512-token block (the system prompt)
    assert len({x.block_hashes[0] for x in reqs[:200] if x.block_hashes}) == 1


def test_unknown_extension(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown trace format"):
        load_trace(tmp_path / "x.parquet")


def test_slice_and_scale() -> None:
    reqs = [TraceRequest(float(t), 10, 1) for t in range(10)]
    sl = slice_trace(reqs, 2.0, 3.0)
    assert [r.arrival for r in sl] == [0.0, 1.0, 2.0]
    assert [r.arrival for r in scale_load(sl, 2.0)] == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError):
        scale_load(sl, 0)


def test_assign_is_seeded_and_follows_the_rules() -> None:
    reqs = [TraceRequest(i * 0.1, 100, 10) for i in range(5000)]
    a = assign(reqs, WorkloadRules(batch_fraction=0.2, tenants=5, seed=7))
    b = assign(reqs, WorkloadRules(batch_fraction=0.2, tenants=5, seed=7))
    c = assign(reqs, WorkloadRules(batch_fraction=0.2, tenants=5, seed=8))
    assert a == b and a != c
    batch = sum(r.slo_class == "batch" for r in a) / len(a)
    assert 0.18 < batch < 0.22
    share = sum(r.tenant == "t0" for r in a) / len(a)
    assert abs(share - zipf_weights(5, 1.0)[0]) < 0.03
    assert len({r.request_id for r in a}) == len(a)
    with pytest.raises(ValueError):
        WorkloadRules(batch_fraction=1.5)
