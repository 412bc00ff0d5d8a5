"""Checking an OpenID Connect ID token: its JWS signature against the provider's JSON
Web Key Set (RS256, PS256 or ES256), then the claims the code flow requires (issuer,
audience, expiry, issue time, nonce). No I/O: the keys and the expected values come
in, the claims or a :class:`TokenError` go out."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

LEEWAY_S = 60.0  # clock skew allowed between the provider and us


class TokenError(ValueError):
    """Why an ID token is not accepted; ``key_problem``: the provider's keys did not
    verify it (worth fetching them again: it may have rotated them)."""

    def __init__(self, message: str, key_problem: bool = False) -> None:
        super().__init__(message)
        self.key_problem = key_problem


def b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int(text: str) -> int:
    return int.from_bytes(b64url(text), "big")


def _verify(alg: str, jwk: Mapping[str, Any], signature: bytes, signed: bytes) -> None:
    if alg in ("RS256", "PS256") and jwk.get("kty") == "RSA":
        key = rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
        pad = padding.PKCS1v15() if alg == "RS256" else padding.PSS(
            padding.MGF1(hashes.SHA256()), hashes.SHA256().digest_size)
        key.verify(signature, signed, pad, hashes.SHA256())
    elif alg == "ES256" and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
        point = ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), ec.SECP256R1())
        if len(signature) != 64:
            raise InvalidSignature
        der = encode_dss_signature(int.from_bytes(signature[:32], "big"),
                                   int.from_bytes(signature[32:], "big"))
        point.public_key().verify(der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        raise TokenError(f"no usable key for alg {alg}")


def verify_id_token(token: str, jwks: Mapping[str, Any], *, issuer: str, client_id: str,
                    nonce: str, now: float) -> dict[str, Any]:
    """The claims of ``token`` if its signature and claims hold, else TokenError."""
    try:
        head_b64, body_b64, sig_b64 = token.split(".")
        header = orjson.loads(b64url(head_b64))
        claims = orjson.loads(b64url(body_b64))
        signature = b64url(sig_b64)
    except (ValueError, orjson.JSONDecodeError):
        raise TokenError("the ID token is not a JWS") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("the ID token is not a JWS")
    alg, kid = header.get("alg"), header.get("kid")
    candidates = [k for k in jwks.get("keys", []) if isinstance(k, dict)
                  and (kid is None or k.get("kid") == kid) and k.get("use", "sig") == "sig"]
    if alg not in ("RS256", "PS256", "ES256") or not candidates:
        raise TokenError(f"the ID token's key ({alg}, kid {kid}) is not the provider's",
                         key_problem=True)
    signed = f"{head_b64}.{body_b64}".encode("ascii")
    for jwk in candidates:
        try:
            _verify(str(alg), jwk, signature, signed)
            break
        except (InvalidSignature, TokenError, KeyError, ValueError):
            continue
    else:
        raise TokenError("the ID token's signature does not verify", key_problem=True)
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    exp, iat = claims.get("exp"), claims.get("iat")
    if claims.get("iss") != issuer:
        raise TokenError("the ID token comes from another issuer")
    if client_id not in audiences:
        raise TokenError("the ID token is for another client")
    if not isinstance(exp, int | float) or exp < now - LEEWAY_S:
        raise TokenError("the ID token has expired")
    if not isinstance(iat, int | float) or iat > now + LEEWAY_S:
        raise TokenError("the ID token was issued in the future")
    if claims.get("nonce") != nonce:
        raise TokenError("the ID token's nonce is not this sign-in's")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise TokenError("the ID token has no subject")
    return dict(claims)
