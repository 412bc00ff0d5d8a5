"""What a cached answer is keyed on.

Every key starts with its **scope**: tenant, app, model alias and model version. No
lookup can name another scope, so a tenant can never be served another's answer,
whatever the text (the cross-tenant leak test holds this).

- The exact key hashes the scope plus the canonical request: the prompt (messages or
  prompt), the tools and how they may be used, the response format and every sampling
  field, and whether the answer is a stream. Canonical: JSON with sorted keys, so
  the order of a body's fields does not matter; everything else does.
- The semantic partition hashes the scope plus what must be *equal* for a near
  question to share an answer: the system prompt's fingerprint, the tool schema's
  fingerprint, the conversation before the user's turn, the request's shape
  (sampling fields, output cap, response format, stream) and the numbers the user's
  turn writes in digits. Only the user's turn is compared by meaning, within its
  partition.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson

# sampling and shaping fields: two requests that differ in any of them differ
SHAPE_FIELDS = (
    "temperature", "top_p", "seed", "n", "stop", "max_tokens", "max_completion_tokens",
    "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "response_format", "reasoning_effort", "best_of", "echo", "suffix", "modalities",
)
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
PROMPT_FIELDS = ("messages", "prompt")
SYSTEM_ROLES = ("system", "developer")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def digest(obj: Any) -> str:
    """A stable hex digest of a JSON value (sorted keys)."""
    data = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may share an entry: one tenant's one app on one model alias and version."""

    tenant: str
    app: str
    alias: str
    version: str

    def parts(self) -> list[str]:
        return [self.tenant, self.app, self.alias, self.version]


def _picked(body: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {k: body[k] for k in names if k in body and body[k] is not None}


def exact_key(scope: Scope, operation: str, body: dict[str, Any], stream: bool) -> str:
    """The exact cache key of a request."""
    canonical = {
        "scope": scope.parts(), "op": operation, "stream": stream,
        "prompt": _picked(body, PROMPT_FIELDS), "tools": _picked(body, TOOL_FIELDS),
        "shape": _picked(body, SHAPE_FIELDS),
    }
    return digest(canonical)


def comparable(text: str) -> str:
    """The user's turn as it is embedded: whitespace collapsed and case folded (the
    encoder is cased; folding raised recall at the same precision on the labelled set,
    docs/BENCHMARKS.md "Caches")."""
    return " ".join(text.split()).casefold()


def numbers(text: str) -> tuple[str, ...]:
    """The numbers written in digits in a text, sorted: "top 3" and "top 5" must not
    share an answer however close their embeddings (they are part of the partition)."""
    return tuple(sorted(_NUMBER.findall(text)))


def message_text(message: Any) -> str:
    """The text of one chat message (string content, or its text parts joined)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


@dataclass(frozen=True, slots=True)
class SemanticKey:
    """``partition``: the digest of all that must be equal; ``text``: the user's turn
    compared by meaning; ``system`` and ``tools``: the fingerprints (in the ledger)."""

    partition: str
    text: str
    system: str
    tools: str


def semantic_key(scope: Scope, operation: str, body: dict[str, Any], stream: bool
                 ) -> SemanticKey | None:
    """The semantic key, or None when the request has no user turn to compare (a chat
    whose last message is not the user's, a prompt that is not one string)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        if not messages or not isinstance(messages[-1], dict) \
                or messages[-1].get("role") != "user":
            return None
        text = message_text(messages[-1])
        system = [m for m in messages[:-1]
                  if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES]
        history = [m for m in messages[:-1]
                   if not (isinstance(m, dict) and m.get("role") in SYSTEM_ROLES)]
    elif isinstance(body.get("prompt"), str):
        text, system, history = body["prompt"], [], []
    else:
        return None
    if not text.strip():
        return None
    system_fp = digest(system)
    tools_fp = digest(_picked(body, TOOL_FIELDS))
    partition = digest({
        "scope": scope.parts(), "op": operation, "stream": stream, "system": system_fp,
        "tools": tools_fp, "history": digest(history), "shape": _picked(body, SHAPE_FIELDS),
        "numbers": numbers(text),
    })
    return SemanticKey(partition, comparable(text), system_fp, tools_fp)
