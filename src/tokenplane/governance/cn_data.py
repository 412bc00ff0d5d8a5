"""Reference tables for mainland-China formats."""

from __future__ import annotations

from types import MappingProxyType

# First two digits of a resident ID: province-level division codes (GB/T 2260),
# plus 71 (Taiwan), 81 (Hong Kong), 82 (Macao) and 83 (residence permits of
# Taiwan residents).
CN_PROVINCE_CODES = frozenset(
    {
        "11", "12", "13", "14", "15",
        "21", "22", "23",
        "31", "32", "33", "34", "35", "36", "37",
        "41", "42", "43", "44", "45", "46",
        "50", "51", "52", "53", "54",
        "61", "62", "63", "64", "65",
        "71", "81", "82", "83",
    }
)  # fmt: skip

# One-character province abbreviations that open a vehicle plate.
CN_PLATE_PROVINCES = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼"

# Plate letters never use I or O.
PLATE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"

# IBAN lengths by country for the most common countries (others: 15..34).
IBAN_LENGTHS = MappingProxyType({
    "AT": 20, "BE": 16, "CH": 21, "CZ": 24, "DE": 22, "DK": 18, "ES": 24, "FI": 18,
    "FR": 27, "GB": 22, "GR": 27, "HU": 28, "IE": 22, "IT": 27, "LU": 20, "NL": 18,
    "NO": 15, "PL": 28, "PT": 25, "SA": 24, "SE": 24, "TR": 26, "AE": 23, "BR": 29,
})  # fmt: skip
