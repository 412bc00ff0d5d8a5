"""Ed25519 signatures of the audit chain's checkpoints and head.

The gateway holds a secret (>= 16 bytes, from ``governance.audit.key_file`` or
``$TOKENPLANE_AUDIT_KEY``); the Ed25519 signing key is derived from it with HKDF, so
one secret serves the signatures, the legacy HMAC checks and (unless
``encryption_key_env`` is set) the content key. ``tokenplane audit verify`` needs
only the public part (``--public-key``), so an auditor who can check the log cannot
sign one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tokenplane.governance.audit.chain import Keys, canonical, head_claim

FORMAT = 2  # Ed25519 checkpoints and a head that list the hashes of the records they cover
UNSIGNED = frozenset({"sig", "hash", "prev_hash"})  # what a record's signature leaves out


def claim_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a v2 checkpoint or head signs: every field but its signature and the chain
    links (``prev_hash`` is checked against the signed digests instead, so a re-hashed
    chain leaves the signature valid and the digests name the changed record)."""
    return {k: v for k, v in record.items() if k not in UNSIGNED}


def fingerprint(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


class Signer:
    """The gateway's signing key (derived from the secret)."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("audit key must be at least 16 bytes")
        seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=b"tokenplane-audit-ed25519").derive(secret)
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        self.public_raw = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.signer = fingerprint(self.public_raw)

    @property
    def public_hex(self) -> str:
        return self.public_raw.hex()

    def sign(self, claim: dict[str, Any]) -> str:
        return self._key.sign(canonical(claim)).hex()

    def verifier(self, secret: bytes | None = None) -> Verifier:
        return Verifier(self.public_raw, Keys.derive(secret) if secret is not None else None)


@dataclass(frozen=True)
class Verifier:
    """Checks signatures with the public key; ``legacy`` (HMAC keys derived from the
    secret) checks records written before Ed25519 (``mac`` fields), when the secret
    is at hand."""

    public_raw: bytes
    legacy: Keys | None = None

    @classmethod
    def from_secret(cls, secret: bytes) -> Verifier:
        return Signer(secret).verifier(secret)

    @classmethod
    def from_public_hex(cls, text: str) -> Verifier:
        try:
            raw = bytes.fromhex(text.strip())
        except ValueError:
            raise ValueError("the public key must be 64 hex digits") from None
        if len(raw) != 32:
            raise ValueError("the public key must be 64 hex digits (32 bytes)")
        return cls(raw)

    @property
    def signer(self) -> str:
        return fingerprint(self.public_raw)

    def public_only(self) -> Verifier:
        """The same key without the secret (what an auditor holds)."""
        return Verifier(self.public_raw)

    def check(self, claim: dict[str, Any], sig: object) -> bool:
        if not isinstance(sig, str):
            return False
        try:
            raw = bytes.fromhex(sig)
            Ed25519PublicKey.from_public_bytes(self.public_raw).verify(raw, canonical(claim))
        except (ValueError, InvalidSignature):
            return False
        return True


def head_signed(head: dict[str, Any], verifier: Verifier) -> bool:
    """The head's signature: Ed25519 (``sig``), or HMAC (``mac``) for a head of the
    first format, checked when the verifier holds the secret."""
    if "sig" in head:
        return verifier.check(head_claim(head), head["sig"])
    return verifier.legacy is not None and verifier.legacy.check(head_claim(head),
                                                                 head.get("mac"))
