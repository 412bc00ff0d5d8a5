"""What never reaches an upstream still counts (issue 33, findings 1 and 4), through a
real gateway: ``POST /v1/context/pack`` is one request and the tokens it counted
against the caller's limits, bounded in documents and characters; prompts refused
for their size (``context_length_exceeded``) count against ``rpm``, and a key that
keeps sending them is paced by its refused bytes; a caller past its rate is refused
before its next body is parsed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.admission import Scope
from tokenplane.meta.limit_store import LimitTarget

MODEL = "sim-llama3-8b"
HELLO: list[Any] = [{"role": "user", "content": "Name three prime numbers."}]
DOC = ("Budgets are reserved at every scope in one atomic step and settled with the "
       "real usage once the answer is complete. ")


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant", context_window=2048)
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0, "refused_bytes_per_s": 1000,
                        "refused_bytes_burst": 200_000}
    cfg["context"] = {"max_documents": 16, "max_characters": 20_000}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("side"))).start()
    yield g
    g.stop()


def _limit(gw: GatewayThread, tenant: str, **limits: Any) -> None:
    svc = gw.gateway.admission
    assert svc is not None
    svc.limits.set(LimitTarget(tenant), limits)


def _pack(gw: GatewayThread, key: str, docs: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{gw.base_url}/context/pack", timeout=30,
                      headers={"authorization": f"Bearer {key}"},
                      json={"model": MODEL, "query": "budgets", "documents": docs,
                            "budget_tokens": 40})


def _docs(n: int, repeat: int = 1) -> list[dict[str, Any]]:
    return [{"id": f"d{i}", "text": f"Document {i}. " + DOC * repeat} for i in range(n)]


def test_pack_is_counted_by_rpm(gw: GatewayThread) -> None:
    _limit(gw, "packrpm", rpm=5)
    key = gw.create_key("packrpm", app="a")
    for _ in range(5):
        r = _pack(gw, key, _docs(3))
        assert r.status_code == 200, r.text
    r = _pack(gw, key, _docs(3))
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(r.headers["retry-after"]) >= 1
    # the same rate refuses the tenant's chat calls: the packs were requests like any
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=3)
    client.close()


def test_pack_counts_the_tokens_it_counted(gw: GatewayThread) -> None:
    _limit(gw, "packtpm", tpm=1_000_000)
    key = gw.create_key("packtpm", app="a")
    r = _pack(gw, key, _docs(4, repeat=3))
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["offered_tokens"] > out["tokens"] > 0
    svc = gw.gateway.admission
    assert svc is not None
    status = gw.call(svc.admission.status("packtpm", Scope("tenant", "packtpm"), svc.now()))
    tpm = next(s for s in status if s.limit_name == "tpm")
    assert (tpm.spent, tpm.reserved) == (out["offered_tokens"], 0)


def test_pack_is_bounded_in_characters(gw: GatewayThread) -> None:
    key = gw.create_key("packbig", app="a")
    r = _pack(gw, key, _docs(16, repeat=12))  # 16 x ~1,400 characters > 20,000
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == ("context_too_large", "documents")
    assert "20000" in err["message"]


def _oversized(client: openai.OpenAI) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, max_tokens=3, messages=[
            {"role": "user", "content": "word " * 3000}])
    return info.value


def test_size_refusals_count_against_rpm(gw: GatewayThread) -> None:
    _limit(gw, "bigrpm", rpm=5)
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("bigrpm", app="a"),
                           max_retries=0)
    for _ in range(5):
        assert _oversized(client).code == "context_length_exceeded"
    # the rate is spent: a normal request is refused, and so is the next oversized
    # one, now before it is counted
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=3)
    assert info.value.code == "rate_limit_exceeded" and "rpm" in info.value.message
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, max_tokens=3, messages=[
            {"role": "user", "content": "word " * 3000}])
    client.close()


def test_a_key_sending_refused_bodies_is_paced(gw: GatewayThread) -> None:
    key = gw.create_key("bigpace", app="a")
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    other = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("bigpace", app="a"),
                          max_retries=0)
    sent = 0
    while sent <= 200_000:  # the burst: ~15 KB bodies, no rpm on this tenant
        _oversized(client)
        sent += 15_000
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=3)
    assert info.value.code == "rate_limit_exceeded"
    assert int(info.value.response.headers["retry-after"]) >= 1
    # the pace is the key's: another key of the tenant is served
    other.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=3)
    client.close()
    other.close()


def test_a_chats_documents_are_bounded_in_characters_too(gw: GatewayThread) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("chatbig", app="a"),
                           max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=HELLO, max_tokens=3,
            extra_body={"tokenplane": {"context": {"documents": _docs(16, repeat=12)}}})
    assert info.value.code == "context_too_large"
    body = info.value.body
    assert isinstance(body, dict) and body["param"] == "tokenplane.context.documents"
    client.close()
