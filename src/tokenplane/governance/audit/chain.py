"""Canonical encoding, record hashes and keyed signatures of the audit chain."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

GENESIS = "0" * 64
HASH_FIELD = b',"hash":"'
DIGEST_HEX = 32  # checkpoints and the head list each record's hash cut to 128 bits


def canonical(obj: Any) -> bytes:
    """Sorted-key compact JSON: the bytes that hashes and signatures cover."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seal(body: dict[str, Any]) -> tuple[bytes, str]:
    """The JSONL line (with its ``hash`` field appended) and the hash itself."""
    data = canonical(body)
    digest = sha256_hex(data)
    return data[:-1] + HASH_FIELD + digest.encode() + b'"}\n', digest


def record_hash(record: dict[str, Any]) -> str:
    """Recompute a parsed record's hash (over every field except ``hash``)."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return sha256_hex(canonical(body))


@dataclass(frozen=True)
class Keys:
    """Keys derived from the configured audit key: one to sign, one to encrypt."""

    mac: bytes
    content: bytes

    @classmethod
    def derive(cls, key: bytes) -> Keys:
        if len(key) < 16:
            raise ValueError("audit key must be at least 16 bytes")
        return cls(_hkdf(key, b"tokenplane-audit-mac"), _hkdf(key, b"tokenplane-audit-content"))

    def sign(self, obj: Any) -> str:
        return hmac.new(self.mac, canonical(obj), hashlib.sha256).hexdigest()

    def check(self, obj: Any, mac: object) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(self.sign(obj), mac)


def _hkdf(key: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(key)


def checkpoint_claim(seq: int, ts: float, prev_hash: str) -> dict[str, Any]:
    """What a checkpoint of the first format (HMAC ``mac``) signs: its position and
    the hash of the record before it."""
    return {"kind": "checkpoint", "seq": seq, "ts": ts, "prev_hash": prev_hash}


def head_claim(head: dict[str, Any]) -> dict[str, Any]:
    """What the head signs: every field but its signature (``mac`` or ``sig``)."""
    return {k: v for k, v in head.items() if k not in ("mac", "sig")}
