"""OpenAI framing (family ``openai``), counted as OpenAI documents for cl100k models.

OpenAI's cookbook counts 3 tokens per message, the tokens of every value (role, content,
name), 1 more when a ``name`` is present, and 3 for the reply priming. ``encode`` produces
ids with exactly that length, using cl100k's chat specials by id (the offline encoding does
not carry them): ``<|im_start|>`` 100264, ``<|im_end|>`` 100265, ``<|im_sep|>`` 100266:

``<|im_start|>{role}[:{name}]<|im_sep|>{content}<|im_end|>`` per message (role, name and
content tokenized separately, as the cookbook does) and ``<|im_start|>assistant<|im_sep|>``.

Tool definitions (OpenAI renders them in a private format) are counted as one extra leading
system message whose content is ``# Tools\\n\\n`` + the JSON tool list. Assistant tool calls
append one JSON object ``{"name": ..., "arguments": ...}`` per call, newline separated, to
the message content. This is an approximation of the hosted model's accounting.
"""

from __future__ import annotations

import json

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.messages import DEFAULT_IMAGE_TOKENS, ChatMessage, Conversation
from tokenplane.tokens.template_base import ChatTemplate, Piece, Tools, content_pieces, tools_json

IM_START = 100264
IM_END = 100265
IM_SEP = 100266


class OpenAITemplate(ChatTemplate):
    family = "openai"

    def __init__(self, tokenizer: Tokenizer, image_tokens: int = DEFAULT_IMAGE_TOKENS) -> None:
        super().__init__(tokenizer, image_tokens)
        self._frames: dict[str, tuple[Piece, Piece, Piece]] = {}

    def _frame(self, source: str) -> tuple[Piece, Piece, Piece]:
        """``<|im_start|>``, ``<|im_sep|>`` and ``<|im_end|>`` of a source (memoised)."""
        found = self._frames.get(source)
        if found is None:
            found = self._frames[source] = (self.special(source, "<|im_start|>", IM_START),
                                      self.special(source, "<|im_sep|>", IM_SEP),
                                      self.special(source, "<|im_end|>", IM_END))
        return found

    def _message(self, source: str, role: str, name: str | None, body: list[Piece]) -> list[Piece]:
        start, sep, end = self._frame(source)
        if name:
            out = [start, Piece(source, role), self.special(source, ":", None), Piece(source, name),
                   sep]
        else:
            out = [start, Piece(source, role), sep]
        out += body
        out.append(end)
        return out

    def pieces(self, conv: Conversation, tools: Tools) -> list[Piece]:
        out: list[Piece] = []
        if tools:
            body = [Piece("tools", "# Tools\n\n" + self.tools_text(tools, tools_json))]
            out += self._message("tools", "system", None, body)
        for m in conv.messages:
            out += self._message(m.source, m.role, m.name, self._body(m))
        out += [
            self.special("user", "<|im_start|>", IM_START),
            Piece("user", "assistant"),
            self.special("user", "<|im_sep|>", IM_SEP),
        ]
        return out

    def _body(self, m: ChatMessage) -> list[Piece]:
        out = content_pieces(m) if m.content else []
        for k, c in enumerate(m.tool_calls):
            call = json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False)
            out.append(Piece(m.source, ("\n" if k or m.content else "") + call))
        return out + self.image_piece(m)
