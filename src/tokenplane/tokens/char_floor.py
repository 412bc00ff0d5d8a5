"""A floor under a prompt's token count, from its characters alone (no tokenizing).

A prompt far too large for its model's context window must be refused before it is
tokenized: tokenizing megabytes takes the better part of a second. The floor must
never be above the count, or a prompt that fits would be refused. It holds for
byte-level BPE tokenizers, where every token stands for a contiguous run of the
text's UTF-8 bytes: tiktoken encodings (OpenAI's, Qwen's), and Hugging Face
``tokenizer.json`` files with a BPE model, a ``ByteLevel`` pre-tokenizer and no
normalizer other than NFC (DeepSeek's, Llama 3's). There:

- no token stands for more than ``L`` bytes, ``L`` the longest entry of the
  vocabulary in bytes (special tokens' texts included, as they may appear in text);
- a text of ``c`` characters (code points) is at least ``c`` bytes of UTF-8;
- so it takes at least ``ceil(c / L)`` tokens. Where the tokenizer first
  normalizes to NFC (which can merge characters), ``c`` is counted after NFC.

``L`` is worked out from each vocabulary when it is loaded (128 for cl100k_base,
Qwen2.5 and DeepSeek-V3). A chat prompt's floor (``tokens/floor_parts.py``) is the
template's framing tokens plus the floor of each text run the counter tokenizes: the
very pieces ``ChatCounter.count_pieces`` counts (so trimming, default system prompts
and joined runs are those of the count), each run's floor rounded up on its own (the
sum of the runs' ceilings is at most the sum of their counts).
Tokenizers of other kinds (SentencePiece, WordPiece, lowercasing or stripping
normalizers) give no floor: their prompts are always counted.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.tokens.base import Tokenizer


@dataclass(frozen=True, slots=True)
class CharFloor:
    """``per_token``: the most characters one token stands for; ``nfc``: the
    tokenizer normalizes text to NFC first."""

    per_token: int
    nfc: bool = False

    def tokens(self, text: str) -> int:
        """The fewest tokens ``text`` can take."""
        n = len(text)
        if self.nfc and not text.isascii():
            n = len(unicodedata.normalize("NFC", text))
        return -(-n // self.per_token)

    def run_tokens(self, texts: list[str]) -> int:
        """The fewest tokens ``"".join(texts)`` can take (joined only where NFC could
        merge characters across the parts: megabytes are not copied for nothing)."""
        if len(texts) == 1:
            return self.tokens(texts[0])
        if self.nfc and not all(t.isascii() for t in texts):
            return self.tokens("".join(texts))
        return -(-sum(map(len, texts)) // self.per_token)


def char_floor(tokenizer: Tokenizer) -> CharFloor | None:
    """The tokenizer's floor (its ``char_floor()``), or None when it has none."""
    make = getattr(tokenizer, "char_floor", None)
    if make is None:
        return None
    found = make()
    return found if isinstance(found, CharFloor) else None


def hf_char_floor(spec: Mapping[str, Any]) -> CharFloor | None:
    """The floor of a Hugging Face ``tokenizer.json`` (parsed), or None unless it is
    byte-level BPE with no normalizer beyond NFC."""
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), Mapping):
        return None
    nfc = False
    for norm in _flatten(spec.get("normalizer"), "normalizers"):
        if norm.get("type") == "NFC":
            nfc = True
        else:
            return None
    if not any(p.get("type") == "ByteLevel"
               for p in _flatten(spec.get("pre_tokenizer"), "pretokenizers")):
        return None
    # a byte-level vocabulary spells each byte as one character
    longest = max((len(t) for t in model["vocab"]), default=0)
    for added in spec.get("added_tokens") or []:
        longest = max(longest, len(str(added.get("content", ""))))
    return CharFloor(longest, nfc) if longest > 0 else None


def hf_char_floor_of(tokenizer_json: str) -> CharFloor | None:
    try:
        return hf_char_floor(json.loads(tokenizer_json))
    except (ValueError, TypeError, AttributeError):
        return None


def _flatten(node: Any, key: str) -> list[Mapping[str, Any]]:
    """A normalizer / pre-tokenizer and the members of its ``Sequence``s."""
    if not isinstance(node, Mapping):
        return []
    if node.get("type") == "Sequence":
        out: list[Mapping[str, Any]] = []
        for sub in node.get(key) or []:
            out += _flatten(sub, key)
        return out
    return [node]
