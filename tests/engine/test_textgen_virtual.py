"""Prompt hashing, deterministic output words, and the virtual-time runner."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.engine.core import Engine, EngineRequest
from tokenplane.engine.defaults import default_tokenizer
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.textgen import WordPool, block_hashes, natural_length
from tokenplane.engine.virtual import run_virtual

TOKENIZER = default_tokenizer()
POOL = WordPool(TOKENIZER)


@given(a=st.lists(st.integers(0, 50), max_size=80), b=st.lists(st.integers(0, 50), max_size=80))
def test_block_hashes_are_chained(a: list[int], b: list[int]) -> None:
    ha, hb = block_hashes(a, 4), block_hashes(b, 4)
    assert len(ha) == len(a) // 4
    for i in range(min(len(ha), len(hb))):
        assert (ha[i] == hb[i]) == (a[: 4 * (i + 1)] == b[: 4 * (i + 1)])


@settings(max_examples=50, deadline=None)
@given(prompt=st.lists(st.integers(0, 100_000), min_size=1, max_size=30),
       n=st.integers(1, 300))
def test_output_words_retokenize_to_the_same_ids(prompt: list[int], n: int) -> None:
    ids = POOL.output_ids(prompt, n)
    assert ids == POOL.output_ids(prompt, n)
    assert TOKENIZER.encode(TOKENIZER.decode(ids)) == ids
    assert 16 <= natural_length(prompt) <= 256


def test_virtual_runner_latencies() -> None:
    profile = get_profile("llama3-8b-a100")
    run = run_virtual(Engine(profile), [(5.0, EngineRequest("a", 100, 10)),
                                        (5.0, EngineRequest("b", 100, 1))])
    a, b = run.timings["a"], run.timings["b"]
    assert a.arrival == 5.0 and a.first_token == b.first_token == b.finish
    assert a.output_tokens == 10 and b.tpot == 0.0
    assert a.ttft > 0 and a.e2e > a.ttft
    assert a.tpot >= profile.t_floor_s
    assert run.end_time == a.finish and run.steps == 10 and run.max_running == 2
