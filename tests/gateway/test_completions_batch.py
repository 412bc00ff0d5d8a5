"""``/v1/completions`` with a batch of prompts, end to end: the official openai client
through a gateway to simulated replicas. Choices indexed as OpenAI does (prompt_index *
n + i), usage summed, streams too; the prompt counted as the sum (source ``user``),
the output reserved for every prompt, each prompt held to the context window on its
own, one ledger event per request; bad batches refused with a 400 naming the field."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.meta.limit_store import LimitTarget
from tokenplane.tokens.prompt_batch import MAX_CHOICES, MAX_PROMPTS

MODEL = "sim-llama3-8b"
PROMPTS = ["Once upon a time", "The quick brown fox jumps", "Write a haiku about rain"]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1)
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0, "clamp_max_tokens": True}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("batch"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("acme", app="batch")


def _client(gw: GatewayThread, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)


def _count(gw: GatewayThread, text: str) -> int:
    return gw.gateway.counters.tokenizer(MODEL).count(text)


def test_batch_non_stream_choices_indexed_and_usage_summed(gw: GatewayThread,
                                                            key: str) -> None:
    client = _client(gw, key)
    resp = client.completions.create(model=MODEL, prompt=PROMPTS, n=2, max_tokens=4,
                                     temperature=0.7)
    assert [c.index for c in resp.choices] == list(range(6))
    assert all(c.finish_reason == "length" for c in resp.choices)
    assert all(_count(gw, c.text) == 4 for c in resp.choices)
    # each prompt's own answers: the two choices of one prompt differ from another's
    by_prompt = [{resp.choices[p * 2 + i].text for i in range(2)} for p in range(3)]
    assert by_prompt[0] != by_prompt[1]
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == sum(_count(gw, p) for p in PROMPTS)
    assert resp.usage.completion_tokens == 24
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 24
    client.close()


def test_batch_stream_indexed_with_summed_usage(gw: GatewayThread, key: str) -> None:
    client = _client(gw, key)
    chunks = list(client.completions.create(
        model=MODEL, prompt=PROMPTS, n=2, max_tokens=5, stream=True,
        stream_options={"include_usage": True}))
    texts: dict[int, str] = defaultdict(str)
    finished: dict[int, str] = {}
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] += ch.text
            if ch.finish_reason is not None:
                finished[ch.index] = ch.finish_reason
    assert sorted(texts) == list(range(6)) and sorted(finished) == list(range(6))
    assert all(_count(gw, t) == 5 for t in texts.values())
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1
    assert usage[0].prompt_tokens == sum(_count(gw, p) for p in PROMPTS)
    assert usage[0].completion_tokens == 30
    client.close()


def test_batch_of_token_id_arrays(gw: GatewayThread, key: str) -> None:
    client = _client(gw, key)
    resp = client.completions.create(model=MODEL, prompt=[[9906, 1917], [791, 4062, 14198]],
                                     max_tokens=3)
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.usage is not None and resp.usage.prompt_tokens == 5
    assert resp.usage.completion_tokens == 6
    one = client.completions.create(model=MODEL, prompt=["Once upon a time"], max_tokens=3)
    assert [c.index for c in one.choices] == [0]
    assert one.usage is not None and one.usage.prompt_tokens == _count(gw, "Once upon a time")
    client.close()


def test_each_prompt_must_fit_the_window_not_their_sum(gw: GatewayThread, key: str) -> None:
    window = gw.gateway.config.models[0].context_window
    long = "word " * 1500  # each ~1500 tokens: three of them are beyond the window
    assert 3 * _count(gw, long) > window > _count(gw, long) + 8
    client = _client(gw, key)
    resp = client.completions.create(model=MODEL, prompt=[long, long + "a", long + "b"],
                                     max_tokens=8)
    assert len(resp.choices) == 3 and resp.usage is not None
    assert resp.usage.prompt_tokens > window
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=["short", long * 3], max_tokens=8)
    assert info.value.code == "context_length_exceeded"
    client.close()


def test_admission_reserves_the_prompts_sum_and_every_output(gw: GatewayThread) -> None:
    svc = gw.gateway.admission
    assert svc is not None
    svc.limits.set(LimitTarget("batchlim"), {"tpm": 100_000})
    client = _client(gw, gw.create_key("batchlim", app="a"))
    raw = client.completions.with_raw_response.create(model=MODEL, prompt=PROMPTS,
                                                      max_tokens=4)
    prompt = sum(_count(gw, p) for p in PROMPTS)
    assert int(raw.headers["x-ratelimit-remaining-tokens"]) == 100_000 - prompt - 3 * 4
    client.close()


def test_a_clamped_batch_gets_a_cap_per_prompt(gw: GatewayThread) -> None:
    """The request's share of what the limit leaves (half of it, with nothing else in
    flight: docs/ADMISSION.md, the clamp) is shared by its prompts: 20 tokens left, a
    share of 10, over 3 prompts is a cap of 3 each."""
    prompt = sum(_count(gw, p) for p in PROMPTS)
    svc = gw.gateway.admission
    assert svc is not None
    svc.limits.set(LimitTarget("batchclamp"), {"tpm": prompt + 20})
    client = _client(gw, gw.create_key("batchclamp", app="a"))
    resp = client.completions.create(model=MODEL, prompt=PROMPTS, max_tokens=50)
    assert [_count(gw, c.text) for c in resp.choices] == [3, 3, 3]
    assert resp.usage is not None and resp.usage.completion_tokens == 9
    client.close()


@pytest.mark.parametrize(("body", "param", "says"), [
    ({"prompt": []}, "prompt", "must not be empty"),
    ({"prompt": ["a", 1]}, "prompt[1]", "mixed types"),
    ({"prompt": [1, "a"]}, "prompt[1]", "mixed types"),
    ({"prompt": ["a", "b", [1, 2]]}, "prompt[2]", "mixed types"),
    ({"prompt": [[1, 2], []]}, "prompt[1]", "empty"),
    ({"prompt": [[1, "x"]]}, "prompt[0][1]", "integer"),
    ({"prompt": ["a"] * (MAX_PROMPTS + 1)}, "prompt", f"at most {MAX_PROMPTS}"),
    ({"prompt": ["a"] * 40, "n": 4}, "n", f"at most {MAX_CHOICES}"),
    ({"prompt": [[-1]]}, "prompt", "outside the vocabulary"),
    ({"prompt": [[1], [-1]]}, "prompt[1]", "outside the vocabulary"),
])
def test_bad_batches_are_400s_naming_the_field(gw: GatewayThread, key: str,
                                               body: dict[str, Any], param: str,
                                               says: str) -> None:
    resp = httpx.post(f"{gw.base_url}/completions", json={"model": MODEL, **body},
                      headers={"authorization": f"Bearer {key}"}, timeout=30)
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert err["param"] == param and says in err["message"], err


def test_one_ledger_event_per_batch_with_summed_counts(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    key = gw.create_key("acme", app="ledger")
    client = _client(gw, key)
    raw = client.completions.with_raw_response.create(model=MODEL, prompt=PROMPTS, n=2,
                                                      max_tokens=3)
    resp = raw.parse()
    rid = raw.headers["x-request-id"]
    with client.completions.with_streaming_response.create(
            model=MODEL, prompt=PROMPTS, max_tokens=2, stream=True,
            stream_options={"include_usage": True}) as stream:
        srid = stream.headers["x-request-id"]
        list(stream.parse())
    client.close()
    gw.stop()
    rows = [r for r in gw.ledger_rows() if r["request_id"] in (rid, srid)]
    assert len(rows) == 2
    by_id = {r["request_id"]: r for r in rows}
    prompt = sum(_count(gw, p) for p in PROMPTS)
    row = by_id[rid]
    assert resp.usage is not None
    assert row["operation"] == "text_completion"
    assert row["input_tokens"] == prompt == resp.usage.prompt_tokens
    assert row["input_user"] == prompt
    assert row["output_tokens"] == 18 == resp.usage.completion_tokens
    assert row["usage_source"] == "upstream"
    assert by_id[srid]["input_tokens"] == prompt and by_id[srid]["output_tokens"] == 6
