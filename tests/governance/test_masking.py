from __future__ import annotations

import pytest

from tokenplane.governance.masking import mask_value


@pytest.mark.parametrize(
    "value,entity,masked",
    [
        ("11010519491231123X", "CN_ID_CARD", "110105********123X"),
        ("13800138000", "CN_MOBILE", "138****8000"),
        ("+86 138 0013 8000", "CN_MOBILE", "+86 1** **** 8000"),
        ("6222 0212 3456 7890", "CN_BANK_CARD", "6222 **** **** 7890"),
        ("4111-1111-1111-1111", "CREDIT_CARD", "4111-****-****-1111"),
        ("john.doe@example.com", "EMAIL_ADDRESS", "j***@example.com"),
        ("192.168.1.20", "IP_ADDRESS", "192.168.*.*"),
        ("2001:db8::1", "IP_ADDRESS", "2001:*::*"),
        ("京A·12345", "CN_LICENSE_PLATE", "京A·****5"),
        ("E12345678", "CN_PASSPORT", "E*****678"),
        ("sk-abcdefghijklmnopqrstuvwx", "API_KEY", "sk-********"),
        ("Xy7#kLm92pQ", "SECRET", "********"),
        ("DE89370400440532013000", "IBAN_CODE", "DE89**************3000"),
        ("ab", "CUSTOM_THING", "**"),  # too short to keep anything
        ("abcdef", "CUSTOM_THING", "a****f"),
    ],
)
def test_mask_shapes(value: str, entity: str, masked: str) -> None:
    assert mask_value(value, entity) == masked


def test_private_key_is_fully_hidden() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    masked = mask_value(pem, "PRIVATE_KEY")
    assert "MIIE" not in masked and masked.startswith("-----BEGIN")


def test_masking_keeps_length_for_digit_identifiers() -> None:
    for value, entity in [("11010519491231123X", "CN_ID_CARD"), ("13800138000", "CN_MOBILE")]:
        assert len(mask_value(value, entity)) == len(value)
