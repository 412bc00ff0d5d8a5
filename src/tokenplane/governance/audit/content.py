"""Content kept in audit records by retention mode: none, redacted or full (encrypted)."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class Retention(StrEnum):
    NONE = "none"
    REDACTED = "redacted"  # recognised PII masked
    FULL = "full"  # encrypted with AES-GCM under the configured key


# Keys whose values are protocol words, not content (``{"role": "user"}``).
STRUCTURAL_KEYS = frozenset({"role", "type", "tool_call_id", "id", "finish_reason", "object"})


def redact_tree(value: Any, redactor: Callable[[str], str]) -> Any:
    """Apply ``redactor`` to every string inside dicts and lists (not to structural keys)."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(v, str):
                out[k] = v if k in STRUCTURAL_KEYS else redactor(v)
            elif isinstance(v, (dict, list, tuple)):
                out[k] = redact_tree(v, redactor)
            else:
                out[k] = v  # numbers, booleans, None
        return out
    if isinstance(value, (list, tuple)):
        return [redact_tree(v, redactor) for v in value]
    return value


def encrypt_content(content: Any, key: bytes, seq: int) -> dict[str, str]:
    """AES-256-GCM; the record's seq is authenticated data, so ciphertexts cannot be swapped."""
    nonce = os.urandom(12)
    ct = AESGCM(key).encrypt(nonce, orjson.dumps(content), str(seq).encode())
    return {
        "enc": "aes-256-gcm",
        "nonce": base64.b64encode(nonce).decode(),
        "ct": base64.b64encode(ct).decode(),
    }


def decrypt_content(blob: dict[str, str], key: bytes, seq: int) -> Any:
    nonce = base64.b64decode(blob["nonce"])
    ct = base64.b64decode(blob["ct"])
    return orjson.loads(AESGCM(key).decrypt(nonce, ct, str(seq).encode()))
