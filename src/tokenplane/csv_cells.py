"""CSV cells a spreadsheet will not run (OWASP, "CSV Injection"): a text cell that
starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets, so a tenant or app named
``=HYPERLINK(...)`` would run in whoever opens the export. Such a cell gets a
leading ``'`` (shown, never evaluated). Numbers are left alone: only text a client
chose (names) can carry a formula, and a negative figure must stay a number."""

from __future__ import annotations

from typing import Any

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
