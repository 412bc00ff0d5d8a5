"""ChatML framing (``chatml``) and Qwen2.5's chat template (``qwen``).

Each message renders as ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` and the prompt ends
with ``<|im_start|>assistant\\n``. ``qwen`` follows Qwen2.5's published template:

- with no leading system message it inserts the default system prompt
  ``You are Qwen, created by Alibaba Cloud. You are a helpful assistant.`` (``chatml`` and
  ``qwen3`` do not; ``qwen3`` is used for Qwen3.x models, whose ``<think>`` handling of
  earlier assistant turns is not modelled);
- tool definitions are appended to the first system message as ``\\n\\n# Tools ...<tools>``
  with one JSON object per line, then the ``<tool_call>`` instructions (both families);
- assistant tool calls render as
  ``\\n<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``;
- consecutive ``tool`` messages share one ``<|im_start|>user`` block, each wrapped in
  ``\\n<tool_response>\\n...\\n</tool_response>``.
"""

from __future__ import annotations

from tokenplane.tokens.messages import ChatMessage, Conversation
from tokenplane.tokens.template_base import (
    ChatTemplate,
    Piece,
    Tools,
    arguments_json,
    content_pieces,
    tool_json,
)

QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
TOOLS_HEAD = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def tools_block(tools: Tools) -> str:
    return TOOLS_HEAD + "".join("\n" + tool_json(t) for t in tools or ()) + TOOLS_TAIL


class ChatMLTemplate(ChatTemplate):
    family = "chatml"
    default_system: str | None = None

    def _open(self, source: str) -> Piece:
        return self.special(source, "<|im_start|>")

    def _close(self, source: str) -> list[Piece]:
        return [self.special(source, "<|im_end|>"), Piece(source, "\n")]

    def pieces(self, conv: Conversation, tools: Tools) -> list[Piece]:
        msgs = conv.messages
        out: list[Piece] = []
        first_system = bool(msgs) and msgs[0].role == "system"
        if first_system or tools or self.default_system is not None:
            head = msgs[0] if first_system else None
            src = head.source if head is not None else "system"
            out.append(self._open(src))
            if head is not None:
                out += content_pieces(head, "system\n")
                out += self.image_piece(head)
            else:
                out.append(Piece(src, "system\n" + (self.default_system or "")))
            if tools:
                out.append(Piece("tools", self.tools_text(tools, tools_block)))
            out += self._close(src)
        n = len(msgs)
        for i, m in enumerate(msgs):
            if i == 0 and first_system:
                continue
            if m.role in ("tool", "function"):
                if i == 0 or msgs[i - 1].role not in ("tool", "function"):
                    out += [self._open(m.source), Piece(m.source, "user")]
                out += content_pieces(m, "\n<tool_response>\n", "\n</tool_response>")
                if i == n - 1 or msgs[i + 1].role not in ("tool", "function"):
                    out += self._close(m.source)
            elif m.role == "assistant" and m.tool_calls:
                out.append(self._open(m.source))
                out += self._assistant_calls(m)
                out += self._close(m.source)
            else:
                out.append(self._open(m.source))
                out += content_pieces(m, m.role + "\n")
                out += self.image_piece(m)
                out += self._close(m.source)
        out += [self._open("user"), Piece("user", "assistant\n")]
        return out

    def _assistant_calls(self, m: ChatMessage) -> list[Piece]:
        out = [Piece(m.source, "assistant")]
        if m.content:
            out += content_pieces(m, "\n")
        for call in m.tool_calls:
            text = (
                '\n<tool_call>\n{"name": "'
                + call.name
                + '", "arguments": '
                + arguments_json(call.arguments)
                + "}\n</tool_call>"
            )
            out.append(Piece(m.source, text))
        return out


class QwenTemplate(ChatMLTemplate):
    family = "qwen"
    default_system = QWEN_DEFAULT_SYSTEM


class Qwen3Template(ChatMLTemplate):
    """Qwen3 / Qwen3.5 without thinking blocks: Qwen2.5's framing minus the default system."""

    family = "qwen3"
