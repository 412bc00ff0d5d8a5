"""EngineService.handle: OpenAI shapes, exact usage, errors, test hooks, early close."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tokenplane.engine.defaults import simple_prompt_ids
from tokenplane.engine.generation import SimulatedDrop
from tokenplane.engine.serving.service import EngineService, ServiceResponse
from tokenplane.tokens.base import Tokenizer

MODEL = "sim-llama"
LONG = "The quick brown fox jumps over the lazy dog while the band plays on. " * 30


def chat_body(text: str = "Say hello", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **extra}


async def post(svc: EngineService, path: str, body: Any,
               headers: dict[str, str] | None = None) -> ServiceResponse:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return await svc.handle("POST", path, raw, headers or {})


async def events(resp: ServiceResponse) -> list[bytes]:
    assert resp.stream is not None
    return [event async for event in resp.stream]


def parse_sse(raw: list[bytes]) -> list[dict[str, Any]]:
    assert raw[-1] == b"data: [DONE]\n\n"
    out = []
    for event in raw[:-1]:
        assert event.startswith(b"data: ") and event.endswith(b"\n\n")
        out.append(orjson.loads(event[6:]))
    return out


async def test_chat_non_stream_usage_is_exact(
    service: EngineService, tokenizer: Tokenizer
) -> None:
    body = chat_body(max_tokens=37)
    resp = await post(service, "/v1/chat/completions", body)
    assert resp.status == 200 and resp.stream is None and resp.body is not None
    data = orjson.loads(resp.body)
    assert data["object"] == "chat.completion" and data["model"] == MODEL
    choice = data["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["role"] == "assistant"
    prompt_ids = simple_prompt_ids(tokenizer).messages(body["messages"], None)
    usage = data["usage"]
    assert usage["prompt_tokens"] == len(prompt_ids)
    assert usage["completion_tokens"] == 37
    assert usage["total_tokens"] == len(prompt_ids) + 37
    assert tokenizer.count(choice["message"]["content"]) == 37


async def test_natural_length_is_deterministic_and_stops(service: EngineService) -> None:
    first = orjson.loads((await post(service, "/v1/chat/completions", chat_body("hi"))).body or b"")
    again = orjson.loads((await post(service, "/v1/chat/completions", chat_body("hi"))).body or b"")
    assert first["choices"][0]["finish_reason"] == "stop"
    assert 16 <= first["usage"]["completion_tokens"] <= 256
    assert first["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"]
    other = orjson.loads((await post(service, "/v1/chat/completions", chat_body("yo"))).body or b"")
    assert other["choices"][0]["message"]["content"] != first["choices"][0]["message"]["content"]


async def test_shared_prompt_reports_cached_tokens(service: EngineService) -> None:
    body = chat_body(LONG, max_tokens=2)
    cold = orjson.loads((await post(service, "/v1/chat/completions", body)).body or b"")
    warm = orjson.loads((await post(service, "/v1/chat/completions", body)).body or b"")
    assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
    prompt = warm["usage"]["prompt_tokens"]
    assert prompt - 16 <= cached < prompt and cached % 16 == 0
    stats = service.engine.stats()
    assert stats.prefix_hits == cached and stats.prefix_queries == 2 * prompt


async def test_chat_stream_with_usage(service: EngineService, tokenizer: Tokenizer) -> None:
    body = chat_body(max_tokens=12, stream=True, stream_options={"include_usage": True})
    resp = await post(service, "/v1/chat/completions", body)
    assert resp.status == 200 and resp.headers["content-type"] == "text/event-stream"
    chunks = parse_sse(await events(resp))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    final = chunks[-1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 12
    body_chunks = chunks[:-1]
    assert all(c["usage"] is None for c in body_chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in body_chunks)
    assert tokenizer.count(text) == 12
    assert len(body_chunks) == 13  # role chunk + one chunk per token
    assert body_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in body_chunks[:-1])


async def test_stream_without_usage_has_no_usage_chunk(service: EngineService) -> None:
    resp = await post(service, "/v1/chat/completions", chat_body(max_tokens=3, stream=True))
    chunks = parse_sse(await events(resp))
    assert all("usage" not in c for c in chunks) and all(c["choices"] for c in chunks)


async def test_completions_stream_and_non_stream(
    service: EngineService, tokenizer: Tokenizer
) -> None:
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 9}
    data = orjson.loads((await post(service, "/v1/completions", body)).body or b"")
    assert data["object"] == "text_completion"
    assert data["usage"]["prompt_tokens"] == tokenizer.count("Once upon a time")
    assert tokenizer.count(data["choices"][0]["text"]) == 9
    stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    chunks = parse_sse(await events(await post(service, "/v1/completions", stream_body)))
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == data["choices"][0]["text"]
    assert chunks[-1]["usage"] == data["usage"]


async def test_completions_batch_like_vllm(service: EngineService, tokenizer: Tokenizer) -> None:
    """A batch of prompts: each served on its own, choice prompt_index * n + i, usage
    summed (each prompt once, each prompt's cached tokens), in streams too."""
    prompts = ["Once upon a time", LONG, [9906, 1917, 11]]
    body = {"model": MODEL, "prompt": prompts[:2], "n": 2, "max_tokens": 3,
            "temperature": 0.8}
    data = orjson.loads((await post(service, "/v1/completions", body)).body or b"")
    assert [c["index"] for c in data["choices"]] == [0, 1, 2, 3]
    assert all(tokenizer.count(c["text"]) == 3 for c in data["choices"])
    assert data["usage"]["prompt_tokens"] == tokenizer.count(prompts[0]) + tokenizer.count(LONG)
    assert data["usage"]["completion_tokens"] == 12
    # LONG again, second in a batch: its own prefix blocks are found in the cache
    warm = {"model": MODEL, "prompt": ["hi there", LONG], "max_tokens": 2}
    again = orjson.loads((await post(service, "/v1/completions", warm)).body or b"")
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] >= tokenizer.count(LONG) - 16
    ids = {"model": MODEL, "prompt": [prompts[2], [1, 2]], "max_tokens": 2, "stream": True,
           "stream_options": {"include_usage": True}}
    chunks = parse_sse(await events(await post(service, "/v1/completions", ids)))
    assert {c["choices"][0]["index"] for c in chunks[:-1]} == {0, 1}
    assert chunks[-1]["usage"]["prompt_tokens"] == 5
    assert chunks[-1]["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/chat/completions", b"{not json", None),
        ("/v1/chat/completions", b"[1, 2]", None),
        ("/v1/chat/completions", {"model": MODEL}, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]},
         "messages[0].role"),
        ("/v1/chat/completions", chat_body(n=0), "n"),
        ("/v1/chat/completions", chat_body(max_tokens=0), "max_tokens"),
        ("/v1/chat/completions", chat_body(max_tokens="5"), "max_tokens"),
        ("/v1/chat/completions", chat_body(stream_options={"include_usage": True}),
         "stream_options"),
        ("/v1/chat/completions", chat_body(temperature=3), "temperature"),
        ("/v1/chat/completions", chat_body(max_tokens=9000), "max_tokens"),
        ("/v1/completions", {"prompt": ["a", [1]]}, "prompt"),
        ("/v1/completions", {"prompt": ["a", ""]}, "prompt"),
        ("/v1/completions", {"prompt": ""}, "prompt"),
        ("/v1/embeddings", {"input": 5}, "input"),
    ],
)
async def test_bad_bodies_get_400_envelope(
    service: EngineService, path: str, body: Any, param: str | None
) -> None:
    resp = await post(service, path, body)
    assert resp.status == 400 and resp.body is not None
    err = orjson.loads(resp.body)["error"]
    assert err["type"] == "invalid_request_error" and err["message"]
    assert err["param"] == param
    assert not service.engine.has_work()


async def test_unknown_model_route_and_method(service: EngineService) -> None:
    resp = await post(service, "/v1/chat/completions", {**chat_body(), "model": "gpt-x"})
    assert resp.status == 404 and b"gpt-x" in (resp.body or b"")
    assert (await service.handle("GET", "/nope", b"", {})).status == 404
    assert (await service.handle("GET", "/v1/chat/completions", b"", {})).status == 405


async def test_sim_fail_header(service: EngineService) -> None:
    resp = await post(service, "/v1/chat/completions", chat_body(), {"X-Sim-Fail": "503"})
    assert resp.status == 503
    assert orjson.loads(resp.body or b"")["error"]["code"] == "simulated_failure"


async def test_sim_fail_after_drops_stream_and_aborts(paced_service: EngineService) -> None:
    body = chat_body(max_tokens=500, stream=True)
    resp = await post(paced_service, "/v1/chat/completions", body, {"x-sim-fail-after": "3"})
    assert resp.stream is not None
    got = []
    with pytest.raises(SimulatedDrop):
        async for event in resp.stream:
            got.append(event)
    assert len(got) == 4  # role chunk + 3 tokens
    stats = paced_service.engine.stats()
    assert stats.num_running == stats.num_waiting == 0
    assert stats.generation_tokens_total < 500


async def test_closing_stream_early_aborts_engine_request(paced_service: EngineService) -> None:
    resp = await post(paced_service, "/v1/chat/completions", chat_body(max_tokens=500, stream=True))
    assert resp.stream is not None
    seen = 0
    async for _event in resp.stream:
        seen += 1
        if seen == 5:
            break
    assert paced_service.engine.stats().num_running == 1
    await resp.stream.aclose()  # type: ignore[attr-defined]
    stats = paced_service.engine.stats()
    assert stats.num_running == stats.num_waiting == 0 and stats.kv_blocks_used == 0
    assert stats.generation_tokens_total < 500
    assert not paced_service.engine.has_work()


async def test_closing_unstarted_stream_aborts(paced_service: EngineService) -> None:
    resp = await post(paced_service, "/v1/completions", {"prompt": "x", "max_tokens": 100,
                                                          "stream": True})
    assert paced_service.engine.has_work()
    await resp.stream.aclose()  # type: ignore[union-attr]
    assert not paced_service.engine.has_work()


async def test_reasoning_effort(service: EngineService, tokenizer: Tokenizer) -> None:
    body = chat_body(max_tokens=40, reasoning_effort="medium")
    data = orjson.loads((await post(service, "/v1/chat/completions", body)).body or b"")
    msg = data["choices"][0]["message"]
    assert data["usage"]["completion_tokens_details"]["reasoning_tokens"] == 20
    assert tokenizer.count(msg["reasoning_content"]) == 20
    assert tokenizer.count(msg["content"]) == 20
    chunks = parse_sse(await events(await post(
        service, "/v1/chat/completions", {**body, "stream": True})))
    deltas = [c["choices"][0]["delta"] for c in chunks[1:]]
    assert sum("reasoning_content" in d for d in deltas) == 20
    assert sum("content" in d for d in deltas) == 20


async def test_metrics_tokenize_models_health_embeddings(
    service: EngineService, tokenizer: Tokenizer
) -> None:
    await post(service, "/v1/chat/completions", chat_body(max_tokens=4))
    metrics = await service.handle("GET", "/metrics", b"", {})
    text = (metrics.body or b"").decode()
    for name in (
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
        "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds", "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total", "vllm:num_preemptions_total",
    ):
        assert name in text, name
    assert f'vllm:generation_tokens_total{{model_name="{MODEL}"}} 4.0' in text
    assert 'vllm:e2e_request_latency_seconds_count{model_name="sim-llama"} 1.0' in text

    tok = orjson.loads((await post(service, "/tokenize", {"prompt": "hello world"})).body or b"")
    assert tok == {"count": 2, "tokens": tokenizer.encode("hello world"), "max_model_len": 8192}
    models = orjson.loads((await service.handle("GET", "/v1/models", b"", {})).body or b"")
    assert models["data"][0]["id"] == MODEL
    assert (await service.handle("GET", "/health", b"", {})).status == 200

    emb = orjson.loads((await post(service, "/v1/embeddings",
                                   {"input": ["a b", "c"], "dimensions": 8})).body or b"")
    assert [len(d["embedding"]) for d in emb["data"]] == [8, 8]
    assert emb["usage"]["prompt_tokens"] == tokenizer.count("a b") + tokenizer.count("c")
    again = orjson.loads((await post(service, "/v1/embeddings",
                                     {"input": "a b", "dimensions": 8})).body or b"")
    assert again["data"][0]["embedding"] == emb["data"][0]["embedding"]

    recorded = orjson.loads((await service.handle("GET", "/sim/requests", b"", {})).body or b"")
    assert len(recorded) == 4 and recorded[-1] == {"input": "a b", "dimensions": 8}
    assert recorded[0] == chat_body(max_tokens=4)
    for i in range(2):
        await post(service, "/tokenize", {"prompt": f"p{i}"})
    recorded = orjson.loads((await service.handle("GET", "/sim/requests", b"", {})).body or b"")
    assert len(recorded) == 5 and recorded[0] == {"prompt": "hello world"}  # keeps the last 5
