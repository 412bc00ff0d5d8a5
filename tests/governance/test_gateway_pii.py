"""PII policy in the gateway: what the upstream receives, what the client gets back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import orjson
import pytest

from tests.gateway.harness import GatewayThread
from tests.governance.echo_upstream import EchoUpstream
from tests.governance.gw_helpers import (
    ID_CARD,
    PII,
    PII_TEXT,
    chat,
    client,
    governed,
    stream_text,
)
from tokenplane.governance.vault import PLACEHOLDER_RE


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayThread, EchoUpstream]]:
    with governed(Path(tmp_path_factory.mktemp("gov"))) as pair:
        yield pair


def test_tokenized_values_never_reach_the_upstream_and_come_back_restored(
        env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("default"))
    before = len(echo.bodies)
    resp = chat(c, PII_TEXT)
    assert resp.choices[0].message.content == PII_TEXT  # restored from the vault
    sent = echo.bodies[before:]
    assert len(sent) == 1
    upstream_text = sent[0]["messages"][0]["content"]
    for value, entity in PII.items():
        assert value not in upstream_text
        assert f"<{entity}_1>" in upstream_text


@pytest.mark.parametrize("seed", range(12))
def test_stream_restores_placeholders_split_anywhere(
        env: tuple[GatewayThread, EchoUpstream], seed: int) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("default"))
    before = len(echo.bodies)
    text, pieces = stream_text(c, PII_TEXT, seed)
    # the whole text equals the original, so no placeholder or fragment reached the client
    assert text == PII_TEXT
    assert not any(PLACEHOLDER_RE.search(p) for p in pieces)
    for body in echo.bodies[before:]:
        for value in PII:
            assert value not in body["messages"][0]["content"]


def test_text_completion_stream_is_restored(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("default"))
    pieces = [ch.choices[0].text for ch in c.completions.create(
        model="echo", prompt=PII_TEXT, stream=True, seed=3, max_tokens=200) if ch.choices]
    assert "".join(pieces) == PII_TEXT
    assert ID_CARD not in echo.bodies[-1]["prompt"]


def test_masked_values_never_reach_the_upstream(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("acme"))  # acme: mask
    resp = chat(c, PII_TEXT)
    got = resp.choices[0].message.content
    sent = echo.bodies[-1]["messages"][0]["content"]
    assert got == sent  # masks are irreversible: the client sees what the model saw
    for value in PII:
        assert value not in sent
    assert "110105********002X" in sent or ID_CARD[:6] in sent


def test_block_names_entity_types_never_values(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("acme", app="strict"))
    before = len(echo.bodies)
    with pytest.raises(openai.BadRequestError) as info:
        chat(c, f"id {ID_CARD} mail zhang.san@example.com phone 13812345678")
    err = info.value
    assert err.code == "pii_blocked"
    assert "CN_ID_CARD" in err.message and "EMAIL_ADDRESS" in err.message
    assert "CN_MOBILE" not in err.message  # masked, not blocked
    for value in PII:
        assert value not in err.message
    assert len(echo.bodies) == before  # nothing went upstream


def test_response_policy_masks_what_the_model_writes(
        env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = client(gw, gw.create_key("globex"))  # prompt allowed, response masked
    resp = chat(c, PII_TEXT)
    assert echo.bodies[-1]["messages"][0]["content"] == PII_TEXT
    got = resp.choices[0].message.content
    for value in PII:
        assert value not in got
    for seed in range(4):
        text, _ = stream_text(c, PII_TEXT, seed)
        assert text == got  # the stream guard masks exactly like the whole-text policy


def test_response_block_refuses_the_answer(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, _ = env
    key = gw.create_key("globex", app="noid")
    with pytest.raises(openai.BadRequestError) as info:
        chat(client(gw, key), PII_TEXT)
    assert info.value.code == "pii_blocked" and ID_CARD not in info.value.message
    body = {"model": "echo", "stream": True, "seed": 1,
            "messages": [{"role": "user", "content": PII_TEXT}]}
    r = httpx.post(gw.base_url + "/chat/completions", json=body,
                   headers={"authorization": f"Bearer {key}"}, timeout=30)
    events = [e for e in r.text.split("\n\n") if e.startswith("data:")]
    assert events[-1] == "data: [DONE]"
    assert orjson.loads(events[-2][5:])["error"]["code"] == "pii_blocked"
    assert ID_CARD not in r.text
