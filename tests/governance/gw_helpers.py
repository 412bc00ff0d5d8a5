"""Shared pieces of the gateway-level governance tests: PII-rich texts, a governed
gateway in front of the echoing upstream."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from openai import OpenAI

from tests.gateway.harness import GatewayThread
from tests.governance.echo_upstream import EchoUpstream, echo_config
from tests.governance.factories import cn_id, luhn_card

ID_CARD = cn_id()
BANK_CARD = luhn_card("622202", 19)
# value -> entity type the analyzer reports
PII: dict[str, str] = {
    ID_CARD: "CN_ID_CARD",
    "13812345678": "CN_MOBILE",
    "zhang.san@example.com": "EMAIL_ADDRESS",
    BANK_CARD: "CN_BANK_CARD",
    "4111 1111 1111 1111": "CREDIT_CARD",
    "sk-abcdefghijklmnopqrstuvwxyz123456": "API_KEY",
    "AKIAIOSFODNN7EXAMPLE": "AWS_ACCESS_KEY",
}
PII_TEXT = (
    f"客户{ID_CARD}的手机号13812345678，邮箱zhang.san@example.com，卡号{BANK_CARD}，"
    "信用卡 4111 1111 1111 1111，key sk-abcdefghijklmnopqrstuvwxyz123456 "
    "AWS AKIAIOSFODNN7EXAMPLE 完毕"
)

GOVERNANCE: dict[str, Any] = {
    "pii": {"prompt": {"default": "tokenize"}},
    "tools": {"allowed": ["get_weather"], "mode": "reject"},
    "injection": {"mode": "block"},
    "max_output_tokens": 512,
    "max_context_tokens": 600,
    "overrides": [
        {"tenant": "acme", "pii": {"prompt": {"default": "mask"}},
         "tools": {"allowed": ["get_weather"], "mode": "strip"},
         "injection": {"mode": "flag"}},
        {"tenant": "acme", "app": "strict",
         "pii": {"prompt": {"default": "mask",
                            "actions": {"CN_ID_CARD": "block", "EMAIL_ADDRESS": "block"}}}},
        {"tenant": "acme", "app": "narrow", "models": ["another-model"]},
        {"tenant": "globex", "pii": {"prompt": {"default": "allow"},
                                     "response": {"default": "mask"}}},
        {"tenant": "globex", "app": "noid",
         "pii": {"response": {"default": "mask", "actions": {"CN_ID_CARD": "block"}}}},
    ],
}

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
SHELL_TOOL = {"type": "function", "function": {
    "name": "run_shell", "parameters": {"type": "object", "properties": {}}}}


@contextmanager
def governed(home: Path, governance: dict[str, Any] | None = GOVERNANCE
             ) -> Iterator[tuple[GatewayThread, EchoUpstream]]:
    echo = EchoUpstream().start()
    gw = GatewayThread(echo_config(echo, governance), home).start()
    try:
        yield gw, echo
    finally:
        gw.stop()
        echo.stop()


def client(gw: GatewayThread, key: str) -> OpenAI:
    return OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=30)


def chat(c: OpenAI, text: str, **kw: Any) -> Any:
    return c.chat.completions.create(model="echo", messages=[{"role": "user", "content": text}],
                                     **kw)


def stream_text(c: OpenAI, text: str, seed: int, **kw: Any) -> tuple[str, list[str]]:
    pieces: list[str] = []
    for chunk in c.chat.completions.create(
            model="echo", messages=[{"role": "user", "content": text}], stream=True,
            seed=seed, **kw):
        for ch in chunk.choices:
            if ch.delta.content:
                pieces.append(ch.delta.content)
    return "".join(pieces), pieces
