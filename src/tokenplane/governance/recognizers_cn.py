"""Recognizers for mainland-China identifiers: ID cards, phones, bank cards, USCC, ..."""

from __future__ import annotations

import datetime as dt

from tokenplane.governance.checksums import cn_id_check_char, luhn_ok, uscc_check_char
from tokenplane.governance.cn_data import CN_PLATE_PROVINCES, CN_PROVINCE_CODES
from tokenplane.governance.pattern import ALNUM, DIGITS, PatternRecognizer, compile_pattern

# Digit look-arounds instead of \b: \b treats CJK as word characters, so it
# would not separate 卡号 from 6222.... The "before" side is checked through
# PatternRecognizer.not_after (faster than a leading look-behind).
_NO_DIGIT_AFTER = r"(?![0-9])"
_NO_ALNUM_AFTER = r"(?![0-9A-Za-z])"


def _strip(value: str) -> str:
    return value.replace(" ", "").replace("-", "").replace("\u00b7", "")


def valid_cn_id(value: str) -> bool:
    """Region, a real birth date (1900-2099) and the MOD 11-2 check character."""
    v = value.upper()
    if len(v) != 18 or not v[:17].isdigit() or v[:2] not in CN_PROVINCE_CODES:
        return False
    year, month, day = int(v[6:10]), int(v[10:12]), int(v[12:14])
    if not 1900 <= year <= 2099:
        return False
    try:
        dt.date(year, month, day)
    except ValueError:
        return False
    return cn_id_check_char(v[:17]) == v[17]


def valid_cn_mobile(value: str) -> bool:
    digits = "".join(c for c in value if c.isdigit())
    if digits.startswith("0086"):
        digits = digits[4:]
    elif digits.startswith("86") and len(digits) == 13:
        digits = digits[2:]
    return len(digits) == 11 and digits[0] == "1" and digits[1] in "3456789"


def valid_landline(value: str) -> bool:
    """Parentheses around the area code come in pairs."""
    return value.startswith("(") == (")" in value)


def valid_passport(value: str) -> bool:
    """E + letter/digit + 7 digits, or G/D/S/P + 8 digits."""
    return value[0] == "E" or value[1].isdigit()


def valid_cn_bank_card(value: str) -> bool:
    digits = _strip(value)
    return 16 <= len(digits) <= 19 and digits.startswith("62") and luhn_ok(digits)


def valid_uscc(value: str) -> bool:
    if len(value) != 18 or (value.isdigit() and valid_cn_id(value)):
        return False
    return uscc_check_char(value[:17]) == value[17]


def valid_plate(value: str) -> bool:
    tail = _strip(value)[2:]
    if len(tail) == 6:  # new-energy: D/F then 5, or 5 digits then D/F
        return tail[0] in "DF" or tail[-1] in "DF"
    letters = sum(1 for c in tail[:4] if c.isalpha())
    return letters <= 2


def cn_recognizers() -> list[PatternRecognizer]:
    """The built-in mainland-China recognizers."""
    uscc_chars = "[0-9A-HJ-NPQRTUWXY]"
    plate_letter = "[A-HJ-NP-Z]"
    plate_char = "[A-HJ-NP-Z0-9]"
    return [
        PatternRecognizer(
            "cn_id_card",
            "CN_ID_CARD",
            compile_pattern(r"[1-8][0-9]{16}[0-9Xx]" + _NO_ALNUM_AFTER),
            0.95,
            valid_cn_id,
            not_after=DIGITS,
        ),
        # Two patterns (bare, and with the +86 / 0086 prefix) so that each starts
        # with a plain character class the regex engine can skip ahead on; the
        # analyzer merges their overlapping spans.
        PatternRecognizer(
            "cn_mobile",
            "CN_MOBILE",
            compile_pattern(r"1[3-9][0-9](?:[ -]?[0-9]{4}){2}" + _NO_DIGIT_AFTER),
            0.85,
            valid_cn_mobile,
            not_after=DIGITS + "+",
        ),
        PatternRecognizer(
            "cn_mobile",
            "CN_MOBILE",
            compile_pattern(r"(?:\+|00)86[ -]?1[3-9][0-9](?:[ -]?[0-9]{4}){2}" + _NO_DIGIT_AFTER),
            0.85,
            valid_cn_mobile,
            not_after=DIGITS + "+",
            prefilter=("+86", "0086"),
        ),
        PatternRecognizer(
            "cn_landline",
            "CN_LANDLINE",
            compile_pattern(
                r"(?:\+86[ -]?|\(0|0)(?:10|2[0-9]|[3-9][0-9]{2})(?:\) ?|[ -])"
                r"[2-8][0-9]{6,7}" + _NO_DIGIT_AFTER
            ),
            0.75,
            valid_landline,
            not_after=DIGITS + "+",
        ),
        PatternRecognizer(
            "cn_bank_card",
            "CN_BANK_CARD",
            compile_pattern(
                r"62[0-9]{2}(?:[ -]?[0-9]{4}){3}(?:[ -]?[0-9]{1,3})?" + _NO_DIGIT_AFTER
            ),
            0.9,
            valid_cn_bank_card,
            not_after=DIGITS,
        ),
        PatternRecognizer(
            "cn_uscc",
            "CN_USCC",
            compile_pattern(
                "[0-9A-HJ-NPQRTUWXY][0-9A-HJ-NPQRTUWXY][0-9]{6}"
                + uscc_chars
                + "{10}"
                + _NO_ALNUM_AFTER
            ),
            0.85,
            valid_uscc,
            not_after=ALNUM,
        ),
        PatternRecognizer(
            "cn_passport",
            "CN_PASSPORT",
            compile_pattern(r"[EGDSP][A-HJ-NP-Z0-9][0-9]{7}" + _NO_ALNUM_AFTER),
            0.6,
            valid_passport,
            context=("护照", "passport", "證件", "证件"),
            context_score=0.9,
            not_after=ALNUM,
        ),
        PatternRecognizer(
            "cn_license_plate",
            "CN_LICENSE_PLATE",
            compile_pattern(
                "[" + CN_PLATE_PROVINCES + "]" + plate_letter + r"[·\- ]?"
                r"(?:[DF]"
                + plate_char
                + r"[0-9]{4}|[0-9]{5}[DF]|"
                + plate_char
                + "{4}[A-HJ-NP-Z0-9挂学警港澳])"
                + _NO_ALNUM_AFTER
            ),
            0.8,
            valid_plate,
        ),
    ]
