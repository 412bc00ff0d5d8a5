"""The official openai client against a running gateway with in-process sim replicas."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from tests.gateway.harness import GatewayThread

MODEL = "sim-llama3-8b"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three prime numbers."},
]


def _expected_prompt(gw: GatewayThread) -> int:
    counters = gw.gateway.counters
    return len(counters.prompt_ids(MODEL).messages(MESSAGES, None))


def test_chat_non_stream_usage_is_exact(gateway: GatewayThread, api_key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)
    resp = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=17)  # type: ignore[arg-type]
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None
    assert resp.usage.completion_tokens == 17
    assert resp.usage.prompt_tokens == _expected_prompt(gateway)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 17
    text = resp.choices[0].message.content or ""
    assert gateway.gateway.counters.tokenizer(MODEL).count(text) == 17
    client.close()


def test_chat_stream_with_and_without_usage(gateway: GatewayThread, api_key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=9, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    ))
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].completion_tokens == 9
    assert usage[0].prompt_tokens == _expected_prompt(gateway)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert gateway.gateway.counters.tokenizer(MODEL).count(text) == 9

    plain = list(client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=9, stream=True,  # type: ignore[arg-type]
    ))
    assert all(c.usage is None for c in plain)
    assert all(c.choices for c in plain)  # the usage-only chunk was not passed on
    client.close()


def test_completions_stream_and_not(gateway: GatewayThread, api_key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)
    resp = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=5)
    assert resp.usage is not None and resp.usage.completion_tokens == 5
    assert resp.usage.prompt_tokens == gateway.gateway.counters.tokenizer(MODEL).count(
        "Once upon a time")
    chunks = list(client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=6, stream=True,
        stream_options={"include_usage": True},
    ))
    assert [c.usage.completion_tokens for c in chunks if c.usage] == [6]
    client.close()


def test_async_client_concurrent_streams(gateway: GatewayThread, api_key: str) -> None:
    async def run() -> list[int]:
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)

        async def one(n: int) -> int:
            stream = await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"count to {n}"}],
                max_tokens=n, stream=True, stream_options={"include_usage": True},
            )
            got = 0
            async for chunk in stream:
                if chunk.usage:
                    got = chunk.usage.completion_tokens
            return got

        try:
            return await asyncio.gather(*(one(n) for n in range(1, 21)))
        finally:
            await client.close()

    assert asyncio.run(run()) == list(range(1, 21))


def test_async_client_non_stream(gateway: GatewayThread, api_key: str) -> None:
    async def run() -> int:
        async with openai.AsyncOpenAI(base_url=gateway.base_url, api_key=api_key,
                                      max_retries=0) as client:
            r = await client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
            assert r.usage is not None
            return r.usage.completion_tokens
    assert asyncio.run(run()) == 3


def test_models_lists_aliases_and_embeddings_forward(gateway: GatewayThread, api_key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)
    assert [m.id for m in client.models.list()] == [MODEL]
    emb = client.embeddings.create(model=MODEL, input=["hello world", "again"])
    assert len(emb.data) == 2 and emb.usage.prompt_tokens > 0
    client.close()


def test_unknown_key_is_401(gateway: GatewayThread) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="tp-nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model=MODEL, messages=MESSAGES)  # type: ignore[arg-type]
    assert info.value.status_code == 401
    client.close()


def test_revoked_key_refused_at_once(gateway: GatewayThread) -> None:
    key, rec = gateway.gateway.keys.create_key("acme", app="bot")
    client = openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
    # revoke through a second store on the same database, as the CLI does
    from tokenplane.meta.keystore import KeyStore

    other = KeyStore(gateway.home / "meta.db")
    assert other.revoke(rec.id)
    other.close()
    # the gateway looks for changes at most every 50 ms: keep asking until refused
    deadline = time.monotonic() + 10
    refused = False
    while not refused and time.monotonic() < deadline:
        try:
            client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=1)  # type: ignore[arg-type]
        except openai.AuthenticationError:
            refused = True
    assert refused
    client.close()


def test_models_retrieve_one(gateway: GatewayThread, api_key: str) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key=api_key, max_retries=0)
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as err:
        client.models.retrieve("no-such-model")
    assert err.value.code == "model_not_found"
    client.close()
