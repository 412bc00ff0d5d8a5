"""Bodies of the simulated engine's small endpoints: models, embeddings, tokenize."""

from __future__ import annotations

import base64
import math
import random
from array import array
from typing import Any

import orjson

from tokenplane.engine.textgen import prompt_seed
from tokenplane.engine.validation import check_model
from tokenplane.errors import invalid
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.ids import check_token_ids

DEFAULT_EMBEDDING_DIM = 256


def models_body(model: str, max_model_len: int, created: int) -> bytes:
    card = {"id": model, "object": "model", "created": created, "owned_by": "vllm",
            "root": model, "parent": None, "max_model_len": max_model_len, "permission": []}
    return orjson.dumps({"object": "list", "data": [card]})


def tokenize_body(tokens: list[int], max_model_len: int) -> bytes:
    return orjson.dumps({"count": len(tokens), "tokens": tokens, "max_model_len": max_model_len})


def _embedding_inputs(value: Any, tokenizer: Tokenizer) -> list[list[int]]:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
        value = [value]
    if not isinstance(value, list) or not value:
        raise invalid("'input' must be a non-empty string, array of strings, or token ids",
                      param="input")
    out: list[list[int]] = []
    for item in value:
        if isinstance(item, str) and item:
            out.append(tokenizer.encode(item))
        elif isinstance(item, list) and item and all(
            isinstance(t, int) and not isinstance(t, bool) for t in item
        ):
            check_token_ids(item, "input")
            out.append([int(t) for t in item])
        else:
            raise invalid("each 'input' item must be a non-empty string or array of token ids",
                          param="input")
    return out


def vector(ids: list[int], dims: int) -> list[float]:
    """A deterministic unit vector seeded by the token ids."""
    rng = random.Random(prompt_seed(ids))
    raw = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


def embeddings_body(body: dict[str, Any], tokenizer: Tokenizer, model: str,
                    max_model_len: int) -> bytes:
    model_arg = body.get("model")
    if model_arg is not None and not isinstance(model_arg, str):
        raise invalid("'model' must be a string", param="model")
    check_model(model_arg, model)
    inputs = _embedding_inputs(body.get("input"), tokenizer)
    dims = body.get("dimensions", DEFAULT_EMBEDDING_DIM)
    if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 8192:
        raise invalid("'dimensions' must be an integer between 1 and 8192", param="dimensions")
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64"):
        raise invalid("'encoding_format' must be 'float' or 'base64'", param="encoding_format")
    data: list[dict[str, Any]] = []
    total = 0
    for i, ids in enumerate(inputs):
        if len(ids) > max_model_len:
            raise invalid(f"input {i} has {len(ids)} tokens; the maximum is {max_model_len}",
                          param="input")
        total += len(ids)
        vec = vector(ids, dims)
        emb: Any = vec if fmt == "float" else base64.b64encode(array("f", vec).tobytes()).decode()
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return orjson.dumps({"object": "list", "data": data, "model": model,
                         "usage": {"prompt_tokens": total, "total_tokens": total}})
