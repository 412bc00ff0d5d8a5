"""Everything the gateway does to a chat request applies to a Messages request: PII
tokenized on the way up and restored inside ``text_delta`` events, tool permissions on
``tool_use`` blocks, a budget that ends a stream the way Anthropic's clients understand,
and an upstream that fails mid-stream ending in an ``error`` event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.governance.echo_upstream import EchoUpstream
from tests.governance.gw_helpers import PII, PII_TEXT, governed
from tokenplane.governance.vault import PLACEHOLDER_RE
from tokenplane.meta.limit_store import LimitTarget

ALIAS = "sim-llama3-8b"


def sdk(gw: GatewayThread, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url.removesuffix("/v1"), api_key=key,
                               max_retries=0, timeout=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayThread, EchoUpstream]]:
    with governed(Path(tmp_path_factory.mktemp("gov"))) as pair:
        yield pair


def test_pii_is_tokenized_up_and_restored_down(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, echo = env
    c = sdk(gw, gw.create_key("default"))
    before = len(echo.bodies)
    msg = c.messages.create(model="echo", max_tokens=400,
                            messages=[{"role": "user", "content": PII_TEXT}])
    assert "".join(b.text for b in msg.content if b.type == "text") == PII_TEXT
    sent = echo.bodies[before:]
    assert len(sent) == 1
    for value, entity in PII.items():
        assert value not in orjson.dumps(sent[0]).decode()
        assert f"<{entity}_1>" in sent[0]["messages"][0]["content"]
    pieces: list[str] = []
    with c.messages.stream(model="echo", max_tokens=400,
                           messages=[{"role": "user", "content": PII_TEXT}]) as s:
        for e in s:
            if e.type == "content_block_delta" and e.delta.type == "text_delta":
                pieces.append(e.delta.text)
    assert "".join(pieces) == PII_TEXT
    assert not any(PLACEHOLDER_RE.search(p) for p in pieces)
    c.close()


def test_tool_permissions_apply_to_tool_use(env: tuple[GatewayThread, EchoUpstream]) -> None:
    gw, _ = env
    c = sdk(gw, gw.create_key("default"))
    tool: Any = {"name": "delete_everything", "input_schema": {"type": "object"}}
    with pytest.raises(anthropic.BadRequestError) as err:
        c.messages.create(model="echo", max_tokens=20, tools=[tool],
                          messages=[{"role": "user", "content": "go"}])
    body: Any = err.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert "delete_everything" in body["error"]["message"]
    c.close()


@pytest.fixture(scope="module")
def sim_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1)
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("gw"))).start()
    yield g
    g.stop()


def test_a_budget_ends_the_stream_as_max_tokens(sim_gw: GatewayThread) -> None:
    msgs: Any = [{"role": "user", "content": "Tell me a long story."}]
    prompt = len(sim_gw.gateway.counters.prompt_ids(ALIAS).messages(msgs, None))
    svc = sim_gw.gateway.admission
    assert svc is not None
    svc.limits.set(LimitTarget("cut"), {"tokens_per_day": prompt + 40})
    c = sdk(sim_gw, sim_gw.create_key("cut", app="a"))
    with c.messages.stream(model=ALIAS, max_tokens=300, messages=msgs) as s:
        kinds = [e.type for e in s]
        final = s.get_final_message()
    assert kinds[-1] == "message_stop" and "message_delta" in kinds
    assert final.stop_reason == "max_tokens"
    text = "".join(b.text for b in final.content if b.type == "text")
    assert 0 < sim_gw.gateway.counters.tokenizer(ALIAS).count(text) <= 40
    c.close()
