from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokenplane.governance.checksums import (
    USCC_CHARSET,
    cn_id_check_char,
    iban_check_digits,
    iban_ok,
    luhn_check_digit,
    luhn_ok,
    shannon_entropy,
    uscc_check_char,
)

digits = st.text(alphabet="0123456789", min_size=1, max_size=30)


@given(digits)
def test_luhn_check_digit_completes_any_payload(payload: str) -> None:
    assert luhn_ok(payload + luhn_check_digit(payload))


@given(digits, st.integers(min_value=0, max_value=29), st.integers(min_value=1, max_value=9))
def test_luhn_catches_every_single_digit_error(payload: str, pos: int, delta: int) -> None:
    number = payload + luhn_check_digit(payload)
    i = pos % len(number)
    changed = number[:i] + str((int(number[i]) + delta) % 10) + number[i + 1 :]
    assert not luhn_ok(changed)


def test_luhn_known_values() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111112")
    assert not luhn_ok("")
    assert not luhn_ok("12a4")


def test_cn_id_check_char_known_values() -> None:
    # The published GB 11643 example 11010519491231002X.
    assert cn_id_check_char("11010519491231002") == "X"
    assert cn_id_check_char("44052418800101001") == "4"  # the check alone, any date


@given(st.text(alphabet="0123456789", min_size=17, max_size=17))
def test_cn_id_check_char_is_in_alphabet(first17: str) -> None:
    assert cn_id_check_char(first17) in "0123456789X"


def test_uscc_known_value() -> None:
    # A widely published sample code: 91350100M000100Y43.
    assert uscc_check_char("91350100M000100Y4") == "3"
    assert uscc_check_char("91350100M000100I4") is None  # I is not in the 31-character set


@given(st.text(alphabet=USCC_CHARSET, min_size=17, max_size=17))
def test_uscc_check_char_in_charset(first17: str) -> None:
    check = uscc_check_char(first17)
    assert check is not None and check in USCC_CHARSET


def test_iban_known_values() -> None:
    assert iban_ok("DE89370400440532013000")
    assert iban_ok("GB82WEST12345698765432")
    assert not iban_ok("GB82WEST12345698765433")
    assert not iban_ok("DE8937040044")


@given(
    st.sampled_from(["DE", "FR", "GB", "NL"]),
    st.text(alphabet="0123456789", min_size=12, max_size=24),
)
def test_iban_check_digits_round_trip(country: str, bban: str) -> None:
    assert iban_ok(country + iban_check_digits(country, bban) + bban)


def test_entropy() -> None:
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert abs(shannon_entropy("abcd") - 2.0) < 1e-9
