from __future__ import annotations

import pytest

from tokenplane.governance.analyzer import Analyzer

from .factories import iban, luhn_card, wrong_check

ANALYZER = Analyzer()


def only(text: str, entity: str) -> list[str]:
    return [text[s.start : s.end] for s in ANALYZER.analyze(text) if s.entity_type == entity]


@pytest.mark.parametrize("value", ["john.doe@example.com", "a+tag@mail.co.uk", "zhang_san@qq.com"])
def test_email_valid(value: str) -> None:
    assert only(f"邮箱{value}，谢谢", "EMAIL_ADDRESS") == [value]
    assert only(f"Mail <{value}>.", "EMAIL_ADDRESS") == [value]


@pytest.mark.parametrize(
    "text", ["user@localhost", "a..b@example.com", "@example.com", "x@-bad-.com"]
)
def test_email_invalid(text: str) -> None:
    assert only(f"see {text} now", "EMAIL_ADDRESS") == []


@pytest.mark.parametrize(
    "value",
    ["+44 20 7946 0958", "+1 (415) 555-2671", "+49-30-901820", "(415) 555-2671", "415-555-2671"],
)
def test_phone_valid(value: str) -> None:
    assert only(f"call {value} today", "PHONE_NUMBER") == [value]


@pytest.mark.parametrize(
    "text", ["2023-11-28 15:30", "version 1.2.3", "415-155-2671", "ISBN 978-3-16"]
)
def test_phone_lookalikes(text: str) -> None:
    assert only(text, "PHONE_NUMBER") == []


@pytest.mark.parametrize(
    "value",
    [
        "4111111111111111",
        "4111 1111 1111 1111",
        "5500-0000-0000-0004",
        "378282246310005",
        luhn_card("2221", 16),
        luhn_card("6011", 16),
    ],
)
def test_credit_card_valid(value: str) -> None:
    assert only(f"card {value} exp 12/29", "CREDIT_CARD") == [value]


@pytest.mark.parametrize(
    "value",
    [
        wrong_check("4111111111111111", "0123456789"),  # Luhn failure
        "0000000000000000",
        "1234567812345670",  # passes Luhn, no issuer starts with 1
        luhn_card("2023", 16),  # date-like order number that passes Luhn
    ],
)
def test_credit_card_invalid(value: str) -> None:
    assert only(f"number {value}", "CREDIT_CARD") == []


def test_iban() -> None:
    assert only("IBAN DE89 3704 0044 0532 0130 00 please", "IBAN_CODE") == [
        "DE89 3704 0044 0532 0130 00"
    ]
    assert only("pay to GB82WEST12345698765432.", "IBAN_CODE") == ["GB82WEST12345698765432"]
    assert only("pay to GB82WEST12345698765433.", "IBAN_CODE") == []
    good = iban("FR", "20041010050500013M02606")
    assert only(f"compte {good}", "IBAN_CODE") == [good]
    assert only("DE89370400440532013", "IBAN_CODE") == []  # wrong length for DE


@pytest.mark.parametrize("value", ["192.168.1.20", "10.0.0.1", "8.8.8.8"])
def test_ipv4_valid(value: str) -> None:
    assert only(f"服务器{value}宕机", "IP_ADDRESS") == [value]


@pytest.mark.parametrize("text", ["256.1.1.1", "1.2.3", "1.2.3.4.5", "01.2.3.4"])
def test_ipv4_invalid(text: str) -> None:
    assert only(f"v {text} x", "IP_ADDRESS") == []


@pytest.mark.parametrize(
    "value", ["2001:db8::1", "fe80::1ff:fe23:4567:890a", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"]
)
def test_ipv6_valid(value: str) -> None:
    assert only(f"地址{value}不可达", "IP_ADDRESS") == [value]


@pytest.mark.parametrize("text", ["std::vector<int>", "at 12:30:45", "a::b::c", "Note: see::"])
def test_ipv6_lookalikes(text: str) -> None:
    assert only(text, "IP_ADDRESS") == []
