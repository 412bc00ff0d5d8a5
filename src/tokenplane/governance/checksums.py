"""Check-digit algorithms used by the recognizers' validators."""

from __future__ import annotations

import math
from collections import Counter
from types import MappingProxyType

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"

USCC_CHARSET = "0123456789ABCDEFGHJKLMNPQRTUWXY"
_USCC_VALUE = MappingProxyType({c: i for i, c in enumerate(USCC_CHARSET)})
_USCC_WEIGHTS = (1, 3, 9, 27, 19, 26, 16, 17, 20, 29, 25, 13, 8, 24, 10, 30, 28)


def luhn_ok(digits: str) -> bool:
    """True when ``digits`` (only 0-9) passes the Luhn (mod 10) check."""
    if not digits or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def luhn_check_digit(payload: str) -> str:
    """The digit that makes ``payload + digit`` pass Luhn."""
    for d in "0123456789":
        if luhn_ok(payload + d):
            return d
    raise ValueError("unreachable")  # pragma: no cover


def cn_id_check_char(first17: str) -> str:
    """ISO 7064 MOD 11-2 check character of a resident ID's first 17 digits."""
    total = sum((ord(c) - 48) * w for c, w in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


def uscc_check_char(first17: str) -> str | None:
    """Mod-31 check character of a unified social credit code, or None if invalid chars."""
    total = 0
    for c, w in zip(first17, _USCC_WEIGHTS, strict=True):
        v = _USCC_VALUE.get(c)
        if v is None:
            return None
        total += v * w
    return USCC_CHARSET[(31 - total % 31) % 31]


def iban_ok(iban: str) -> bool:
    """ISO 13616 mod-97 check of an IBAN without spaces."""
    if len(iban) < 15 or len(iban) > 34 or not iban.isalnum() or not iban.isascii():
        return False
    moved = iban[4:] + iban[:4]
    number = "".join(str(int(c, 36)) for c in moved.upper())
    return int(number) % 97 == 1


def iban_check_digits(country: str, bban: str) -> str:
    """The two check digits for ``country + ?? + bban``."""
    number = "".join(str(int(c, 36)) for c in (bban + country + "00").upper())
    return f"{98 - int(number) % 97:02d}"


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())
