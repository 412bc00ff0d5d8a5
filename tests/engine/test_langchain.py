"""LangChain against the simulated engine through a real gateway: ``with_structured_output``
(json_schema and function calling) parses into the pydantic model, and ``bind_tools``
gives tool calls whose arguments the tool accepts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Literal

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

from tests.engine.test_gateway_behaviour import MODEL, in_process_config
from tests.gateway.harness import GatewayThread


class Priority(StrEnum):
    low = "low"
    high = "high"


class Address(BaseModel):
    street: str = Field(min_length=3, max_length=60)
    city: str
    postcode: str | None = None


class Contact(BaseModel):
    """A person to call back."""

    name: str = Field(description="full name")
    age: int = Field(ge=18, le=99)
    score: float = Field(gt=0, lt=1)
    tags: list[str] = Field(min_length=1, max_length=3)
    priority: Priority
    kind: Literal["customer", "supplier"]
    address: Address
    others: list[Address] = Field(default_factory=list, max_length=2)
    since: dt.date
    last_seen: dt.datetime
    vip: bool


@tool
def convert(amount: float, currency: Literal["EUR", "USD", "JPY"]) -> str:
    """Convert an amount of money into a currency."""
    return f"{amount:.2f} {currency}"


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatOpenAI]:
    gw = GatewayThread(in_process_config(), Path(tmp_path_factory.mktemp("lc"))).start()
    try:
        yield ChatOpenAI(model=MODEL, base_url=gw.base_url,
                         api_key=gw.create_key("default", app="langchain"),  # type: ignore[arg-type]
                         max_retries=0)
    finally:
        gw.stop()


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_with_structured_output(llm: ChatOpenAI, method: str) -> None:
    structured = llm.with_structured_output(Contact, method=method)  # type: ignore[arg-type]
    for seed in range(3):
        out = structured.invoke("Who should I call back?", seed=seed)  # type: ignore[arg-type]
        assert isinstance(out, Contact)
        assert 18 <= out.age <= 99 and 0 < out.score < 1 and 1 <= len(out.tags) <= 3


def test_with_structured_output_include_raw(llm: ChatOpenAI) -> None:
    structured = llm.with_structured_output(Contact, method="json_schema", include_raw=True)
    out = structured.invoke("Who should I call back?")
    assert isinstance(out, dict) and out["parsing_error"] is None
    assert isinstance(out["parsed"], Contact)
    usage = out["raw"].usage_metadata
    assert usage is not None and usage["output_tokens"] > 0


def test_bind_tools_loop(llm: ChatOpenAI) -> None:
    bound = llm.bind_tools([convert], tool_choice="convert")
    question = HumanMessage("How much is 12 dollars in yen?")
    ai = bound.invoke([question])
    assert ai.tool_calls and ai.tool_calls[0]["name"] == "convert"
    call = ai.tool_calls[0]
    assert call["id"] is not None and call["id"].startswith("call_")
    result = convert.invoke(call["args"])  # the args validate against the tool's schema
    answer = llm.bind_tools([convert]).invoke(
        [question, ai, ToolMessage(result, tool_call_id=call["id"])])
    assert not answer.tool_calls and isinstance(answer.content, str) and answer.content
