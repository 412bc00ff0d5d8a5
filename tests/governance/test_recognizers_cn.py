from __future__ import annotations

import pytest

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.checksums import luhn_ok
from tokenplane.governance.recognizers_cn import cn_recognizers

from .factories import cn_id, luhn_card, uscc, wrong_check

ANALYZER = Analyzer()


def found(text: str) -> list[tuple[str, str]]:
    return [(s.entity_type, text[s.start : s.end]) for s in ANALYZER.analyze(text)]


def only(text: str, entity: str) -> list[str]:
    return [v for e, v in found(text) if e == entity]


# -- resident ID -------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "11010519491231002X",
        "11010519491231002x",
        cn_id("440524", "19800101", "001"),
        cn_id("650102", "20000229", "123"),  # leap day
        cn_id("830000", "19991231", "555"),  # residence permit (83)
    ],
)
def test_cn_id_valid(value: str) -> None:
    assert only(f"身份证号{value}，请核对", "CN_ID_CARD") == [value]


@pytest.mark.parametrize(
    "value",
    [
        wrong_check("11010519491231002X"),  # wrong check character
        cn_id("990105", "19491231", "002"),  # 99 is no province
        cn_id("110105", "19490230", "002"),  # 30 February
        cn_id("110105", "20010229", "002"),  # 2001 is no leap year
        cn_id("110105", "18991231", "002"),  # before 1900
        cn_id("110105", "19491331", "002"),  # month 13
    ],
)
def test_cn_id_invalid(value: str) -> None:
    assert only(f"证件 {value} 已提交", "CN_ID_CARD") == []


def test_cn_id_inside_longer_digit_run_is_not_matched() -> None:
    valid = "11010519491231002X"
    assert only("9" + valid, "CN_ID_CARD") == []
    assert only(valid[:-1] + "01", "CN_ID_CARD") == []


# -- mobile ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["13800138000", "+86 138 0013 8000", "+8613800138000", "0086-139-1234-5678", "199-1234-5678"],
)
def test_cn_mobile_valid(value: str) -> None:
    assert only(f"手机{value}联系我", "CN_MOBILE") == [value]


@pytest.mark.parametrize(
    "value",
    [
        "12800138000",  # second digit 2
        "1380013800",  # 10 digits
        "138001380001",  # 12 digits
        "1700000000000",  # millisecond timestamp
    ],
)
def test_cn_mobile_invalid(value: str) -> None:
    assert only(f"编号{value}。", "CN_MOBILE") == []


def test_cn_mobile_next_to_cjk_and_latin() -> None:
    assert only("电话13912345678谢谢", "CN_MOBILE") == ["13912345678"]
    assert only("tel:13912345678.", "CN_MOBILE") == ["13912345678"]


# -- landline ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["010-62345678", "0755-2345678", "(021)62345678", "+86 10 62345678"]
)
def test_cn_landline_valid(value: str) -> None:
    assert only(f"座机{value}转分机", "CN_LANDLINE") == [value]


@pytest.mark.parametrize("value", ["2023-11-28", "010-1234567890", "010-02345678"])
def test_cn_landline_invalid(value: str) -> None:
    assert only(f"日期{value}。", "CN_LANDLINE") == []


# -- bank cards --------------------------------------------------------------


def test_cn_bank_card_valid_and_adjacent_to_cjk() -> None:
    card = luhn_card("622202", 19)
    assert only(f"卡号{card}已冻结", "CN_BANK_CARD") == [card]
    spaced = " ".join(card[i : i + 4] for i in range(0, 16, 4)) + " " + card[16:]
    assert only(f"卡号 {spaced} 。", "CN_BANK_CARD") == [spaced]


def test_cn_bank_card_luhn_failure() -> None:
    card = luhn_card("622202", 16)
    bad = wrong_check(card, "0123456789")
    assert not luhn_ok(bad)
    assert found(f"卡号{bad}") == []


def test_order_and_tracking_numbers_are_not_cards() -> None:
    # Order numbers (date + serial) and courier tracking numbers.
    for text in ["订单号20231128123456已发货", "快递单号SF1234567890123", "运单 YT7584930216453"]:
        assert [e for e, _ in found(text) if e in ("CN_BANK_CARD", "CREDIT_CARD")] == []


# -- USCC --------------------------------------------------------------------


def test_uscc_valid_and_invalid() -> None:
    code = uscc()
    assert only(f"统一社会信用代码：{code}。", "CN_USCC") == [code]
    assert only(f"统一社会信用代码：{wrong_check(code, 'ABC0123')}。", "CN_USCC") == []
    assert only("代码91350100M000100I43", "CN_USCC") == []  # I is not allowed


# -- passport and plates -------------------------------------------------------


def test_passport() -> None:
    spans = [
        s
        for s in ANALYZER.analyze("护照号码E12345678，有效期十年")
        if s.entity_type == "CN_PASSPORT"
    ]
    assert len(spans) == 1 and spans[0].score >= 0.9  # context raises the score
    assert only("型号EX12345678X", "CN_PASSPORT") == []


@pytest.mark.parametrize(
    "value", ["京A12345", "粤B·D12345", "沪AD12345", "苏E12345F", "浙A1234学", "川A·8K9P2"]
)
def test_plates_valid(value: str) -> None:
    assert only(f"车牌{value}违章", "CN_LICENSE_PLATE") == [value]


@pytest.mark.parametrize("value", ["京I12345", "京AABC12", "京A12345X"])
def test_plates_invalid(value: str) -> None:
    assert only(f"车牌{value}", "CN_LICENSE_PLATE") == []


def test_every_cn_recognizer_has_a_name_and_entity() -> None:
    names = {r.name for r in cn_recognizers()}
    assert len(names) == 7
    assert {e for r in cn_recognizers() for e in r.entities} == {
        "CN_ID_CARD",
        "CN_MOBILE",
        "CN_LANDLINE",
        "CN_BANK_CARD",
        "CN_USCC",
        "CN_PASSPORT",
        "CN_LICENSE_PLATE",
    }
