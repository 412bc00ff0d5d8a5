"""Llama 3 framing (family ``llama3``), with framing ids when the vocabulary lacks them.

``<|begin_of_text|>`` then per message
``<|start_header_id|>{role}<|end_header_id|>\\n\\n{content, trimmed}<|eot_id|>`` and the
generation prompt ``<|start_header_id|>assistant<|end_header_id|>\\n\\n``. With a Llama 3
``tokenizer.json`` the specials are the vocabulary's; otherwise (counting with cl100k as an
approximation) they are Llama 3's ids 128000 / 128006 / 128007 / 128009. Tool definitions
render as a leading ``system`` block holding the JSON tool list; tool results use the role
``ipython`` (Llama 3.1); assistant tool calls append one JSON object per call to the content.
"""

from __future__ import annotations

import json

from tokenplane.tokens.messages import ChatMessage, Conversation
from tokenplane.tokens.template_base import ChatTemplate, Piece, Tools, content_pieces, tools_json

BEGIN_OF_TEXT = 128000
START_HEADER = 128006
END_HEADER = 128007
EOT = 128009


class Llama3Template(ChatTemplate):
    family = "llama3"

    def _block(self, source: str, role: str, body: list[Piece]) -> list[Piece]:
        return [
            self.special(source, "<|start_header_id|>", START_HEADER),
            Piece(source, role),
            self.special(source, "<|end_header_id|>", END_HEADER),
            *body,
            self.special(source, "<|eot_id|>", EOT),
        ]

    def pieces(self, conv: Conversation, tools: Tools) -> list[Piece]:
        out = [self.special("system", "<|begin_of_text|>", BEGIN_OF_TEXT)]
        if tools:
            out += self._block(
                "tools", "system", [Piece("tools", "\n\n" + self.tools_text(tools, tools_json))]
            )
        for m in conv.messages:
            role = "ipython" if m.role in ("tool", "function") else m.role
            out += self._block(m.source, role, self._body(m))
        out += [
            self.special("user", "<|start_header_id|>", START_HEADER),
            Piece("user", "assistant"),
            self.special("user", "<|end_header_id|>", END_HEADER),
            Piece("user", "\n\n"),
        ]
        return out

    def _body(self, m: ChatMessage) -> list[Piece]:
        out = content_pieces(m, "\n\n", strip=True)
        for c in m.tool_calls:
            call = json.dumps({"name": c.name, "parameters": c.arguments}, ensure_ascii=False)
            out.append(Piece(m.source, "\n" + call))
        return out + self.image_piece(m)
