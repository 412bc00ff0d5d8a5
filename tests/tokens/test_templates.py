"""Chat framing per family: ``encode`` against independent renderings of each template."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tokenplane.tokens.counter import ChatCounter, TokenCounting
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.templates import FAMILIES, make_template

from .convgen import conversation

MODELS = {
    "openai": "gpt-4",
    "qwen": "qwen2.5-72b-instruct",
    "deepseek": "deepseek-chat",
    "llama3": "llama-3-8b-instruct",
}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content)


def qwen25_reference(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """Qwen2.5-Instruct's chat template (add_generation_prompt=True), written out by hand."""
    out = ""
    first_sys = bool(messages) and messages[0]["role"] == "system"
    default = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    if tools:
        out += "<|im_start|>system\n" + (_text(messages[0]["content"]) if first_sys else default)
        out += (
            "\n\n# Tools\n\nYou may call one or more functions to assist with the user query."
            "\n\nYou are provided with function signatures within <tools></tools> XML tags:"
            "\n<tools>"
        )
        for t in tools:
            out += "\n" + json.dumps(t, ensure_ascii=False)
        out += (
            "\n</tools>\n\nFor each function call, return a json object with function name "
            "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
            "<|im_end|>\n"
        )
    elif first_sys:
        out += "<|im_start|>system\n" + _text(messages[0]["content"]) + "<|im_end|>\n"
    else:
        out += "<|im_start|>system\n" + default + "<|im_end|>\n"
    for i, m in enumerate(messages):
        role = m["role"]
        if (
            role == "user"
            or (role == "system" and i > 0)
            or (role == "assistant" and not m.get("tool_calls"))
        ):
            out += "<|im_start|>" + role + "\n" + _text(m["content"]) + "<|im_end|>\n"
        elif role == "assistant":
            out += "<|im_start|>assistant"
            if m.get("content"):
                out += "\n" + _text(m["content"])
            for call in m["tool_calls"]:
                fn = call["function"]
                args = json.loads(fn["arguments"])  # vLLM parses the JSON string first
                out += (
                    '\n<tool_call>\n{"name": "'
                    + fn["name"]
                    + '", "arguments": '
                    + json.dumps(args, ensure_ascii=False)
                    + "}\n</tool_call>"
                )
            out += "<|im_end|>\n"
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                out += "<|im_start|>user"
            out += "\n<tool_response>\n" + _text(m["content"]) + "\n</tool_response>"
            if i == len(messages) - 1 or messages[i + 1]["role"] != "tool":
                out += "<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


def deepseek_v3_reference(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> str:
    """DeepSeek-V3's chat template as documented in template_deepseek (flags reset per use)."""
    systems = [_text(m["content"]) for m in messages if m["role"] == "system"]
    out = "<｜begin▁of▁sentence｜>" + "\n\n".join(systems)
    if tools:
        out += ("\n\n" if systems else "") + "## Tools\n" + json.dumps(tools, ensure_ascii=False)
    is_tool = False
    for m in messages:
        role = m["role"]
        if role == "user":
            is_tool = False
            out += "<｜User｜>" + _text(m["content"])
        elif role == "assistant" and m.get("tool_calls"):
            is_tool = False
            out += "<｜Assistant｜>" + _text(m.get("content")) + "<｜tool▁calls▁begin｜>"
            for k, call in enumerate(m["tool_calls"]):
                fn = call["function"]
                out += ("\n" if k else "") + "<｜tool▁call▁begin｜>" + call["type"]
                out += "<｜tool▁sep｜>" + fn["name"] + "\n```json\n" + fn["arguments"] + "\n```"
                out += "<｜tool▁call▁end｜>"
            out += "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
        elif role == "assistant":
            out += "<｜tool▁outputs▁end｜>" if is_tool else "<｜Assistant｜>"
            out += _text(m["content"]) + "<｜end▁of▁sentence｜>"
            is_tool = False
        elif role == "tool":
            if not is_tool:
                out += "<｜tool▁outputs▁begin｜>"
            is_tool = True
            out += "<｜tool▁output▁begin｜>" + _text(m["content"]) + "<｜tool▁output▁end｜>"
    return out + ("<｜tool▁outputs▁end｜>" if is_tool else "<｜Assistant｜>")


REFERENCES = {"qwen": qwen25_reference, "deepseek": deepseek_v3_reference}


@pytest.mark.parametrize("family", ["qwen", "deepseek"])
def test_encode_equals_tokenizing_the_documented_template(
    counting: TokenCounting, family: str
) -> None:
    counter = counting.for_model(MODELS[family])
    assert counter is not None
    template = counter.template
    tok = template.tokenizer
    rng = random.Random(11)
    for _ in range(120):
        msgs, tools = conversation(rng)
        expected = REFERENCES[family](msgs, tools)
        assert template.render(msgs, tools) == expected
        assert template.encode(msgs, tools) == tok.encode(expected)


def test_deepseek_tool_output_run_ends_without_generation_prompt(counting: TokenCounting) -> None:
    counter = counting.for_model("deepseek-chat")
    assert counter is not None
    msgs = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "content": "42"},
    ]
    assert counter.template.render(msgs).endswith(
        "<｜tool▁output▁begin｜>42<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
    )


def openai_cookbook_count(counter: ChatCounter, messages: list[dict[str, Any]]) -> int:
    """OpenAI's documented count: 3 per message, every value, +1 per name, +3 priming."""
    enc = counter.template.tokenizer
    n = 3
    for m in messages:
        n += 3 + len(enc.encode(m["role"])) + len(enc.encode(_text(m["content"])))
        if "name" in m:
            n += 1 + len(enc.encode(m["name"]))
    return n


def test_openai_matches_cookbook_formula(counting: TokenCounting) -> None:
    counter = counting.for_model("gpt-4")
    assert counter is not None
    rng = random.Random(3)
    for _ in range(100):
        msgs, _ = conversation(rng)
        msgs = [m for m in msgs if not m.get("tool_calls") and m["role"] != "tool"]
        expected = openai_cookbook_count(counter, msgs)
        assert len(counter.template.encode(msgs)) == expected
        assert counter.count(msgs).counts.prompt == expected
    # the cookbook's worked example (gpt-3.5/gpt-4): 2 messages without names
    example = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
    ]
    assert counter.count(example).counts.prompt == 3 + (3 + 1 + 6) + (3 + 1 + 2)


def test_llama3_uses_header_ids(counting: TokenCounting) -> None:
    counter = counting.for_model("meta-llama/Meta-Llama-3-8B-Instruct")
    assert counter is not None and not counter.exact
    msgs = [{"role": "user", "content": "  Hello there \n"}]
    ids = counter.template.encode(msgs)
    tok = counter.template.tokenizer
    expected = [
        128000,
        128006,
        *tok.encode("user"),
        128007,
        *tok.encode("\n\nHello there"),
        128009,
        128006,
        *tok.encode("assistant"),
        128007,
        *tok.encode("\n\n"),
    ]
    assert ids == expected
    assert counter.template.render(msgs) == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_chatml_has_no_default_system(counting: TokenCounting) -> None:
    tok = counting.registry.get("qwen:qwen2.5-72b-instruct")
    chatml = make_template("chatml", tok)
    assert chatml.render([{"role": "user", "content": "x"}]) == (
        "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    )
    assert chatml.encode([{"role": "user", "content": "x"}]) == tok.encode(
        chatml.render([{"role": "user", "content": "x"}])
    )
    with pytest.raises(ValueError, match="unknown chat family"):
        make_template("nope", tok)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fast_count_equals_len_encode(counting: TokenCounting, family: str) -> None:
    spec = (
        "tiktoken:cl100k_base"
        if family in ("openai", "llama3")
        else ("deepseek" if family == "deepseek" else "qwen:qwen2.5-72b-instruct")
    )
    template = make_template(family, counting.registry.get(spec), image_tokens=85)
    counter = ChatCounter(template, SegmentCache(max_entries=64))
    rng = random.Random(sum(map(ord, family)))
    for i in range(150):
        msgs, tools = conversation(rng)
        if i % 10 == 0:
            msgs[-1]["content"] = [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "x"}},
            ]
        for _ in range(2):  # cold, then warm
            result = counter.count(msgs, tools)
            assert result.counts.prompt == len(template.encode(msgs, tools))
            assert min(result.counts.as_dict().values()) >= 0
            assert sum(s.tokens for s in result.segments) <= result.counts.prompt
    assert counter.cache.hits > 0 and counter.cache.evictions > 0
