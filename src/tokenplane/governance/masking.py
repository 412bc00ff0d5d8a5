"""Irreversible masking that keeps a recognisable shape (``110101********123X``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

MASK = "*"

# entity type -> (characters kept at the start, characters kept at the end),
# counted over letters and digits only; separators keep their place.
_KEEP: Mapping[str, tuple[int, int]] = MappingProxyType(
    {
        "CN_ID_CARD": (6, 4),
        "CN_MOBILE": (3, 4),
        "CN_LANDLINE": (4, 2),
        "CN_BANK_CARD": (4, 4),
        "CREDIT_CARD": (4, 4),
        "CN_USCC": (2, 2),
        "CN_PASSPORT": (1, 3),
        "CN_LICENSE_PLATE": (2, 1),
        "PHONE_NUMBER": (3, 2),
        "IBAN_CODE": (4, 4),
        "API_KEY": (3, 0),
        "AWS_ACCESS_KEY": (4, 0),
        "JWT": (3, 0),
        "SECRET": (0, 0),
    }
)
_DEFAULT_KEEP = (1, 1)


def _mask_alnum(value: str, keep_start: int, keep_end: int) -> str:
    positions = [i for i, c in enumerate(value) if c.isalnum()]
    n = len(positions)
    if keep_start + keep_end >= n:
        keep_start, keep_end = (1, 0) if n > 2 else (0, 0)
    hidden = set(positions[keep_start : n - keep_end])
    return "".join(MASK if i in hidden else c for i, c in enumerate(value))


def _mask_email(value: str) -> str:
    local, _, domain = value.rpartition("@")
    return f"{local[:1]}***@{domain}"


def _mask_ip(value: str) -> str:
    if "." in value and ":" not in value:
        parts = value.split(".")
        return ".".join(parts[:2] + [MASK] * (len(parts) - 2))
    groups = value.split(":")
    return ":".join([groups[0]] + [MASK if g else "" for g in groups[1:]])


def mask_value(value: str, entity_type: str) -> str:
    """The masked form of ``value`` (never reversible)."""
    if entity_type == "EMAIL_ADDRESS" and "@" in value:
        return _mask_email(value)
    if entity_type == "IP_ADDRESS":
        return _mask_ip(value)
    if entity_type == "PRIVATE_KEY":
        return "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"
    if entity_type in ("SECRET", "API_KEY", "AWS_ACCESS_KEY", "JWT"):
        keep = _KEEP[entity_type][0]
        return value[:keep] + MASK * 8
    keep_start, keep_end = _KEEP.get(entity_type, _DEFAULT_KEEP)
    return _mask_alnum(value, keep_start, keep_end)
