"""Builders of valid (and deliberately invalid) identifiers for the recognizer tests."""

from __future__ import annotations

from tokenplane.governance.checksums import (
    USCC_CHARSET,
    cn_id_check_char,
    iban_check_digits,
    luhn_check_digit,
    uscc_check_char,
)


def cn_id(region: str = "110105", birth: str = "19491231", serial: str = "002") -> str:
    first17 = region + birth + serial
    return first17 + cn_id_check_char(first17)


def wrong_check(value: str, alphabet: str = "0123456789X") -> str:
    """``value`` with a different last character."""
    last = value[-1]
    return value[:-1] + next(c for c in alphabet if c != last)


def luhn_card(prefix: str, length: int) -> str:
    payload = prefix + "1234567890123456789"[: length - len(prefix) - 1]
    return payload + luhn_check_digit(payload)


def uscc(first17: str = "91350100M000100Y4") -> str:
    check = uscc_check_char(first17)
    assert check is not None
    return first17 + check


def iban(country: str, bban: str) -> str:
    return country + iban_check_digits(country, bban) + bban


USCC_ALPHABET = USCC_CHARSET
