"""The README reads as one text (issue 31): no fragments left by merges, the admin
API's scope said once, and the quickstart names how to make ``audit verify`` prove
authenticity."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _paragraphs() -> list[str]:
    text = README.read_text()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def test_no_paragraph_starts_in_the_middle_of_a_sentence() -> None:
    for p in _paragraphs():
        first = p.splitlines()[0]
        if first.startswith(("|", "-", "*", "#", "!", "[", "`", "<", ">")) or first[0].isdigit():
            continue
        assert not first[0].islower(), first
    for line in README.read_text().splitlines():  # a fragment glued under a paragraph
        assert not re.match(r"^limits, budget status", line), line


def test_the_admin_scope_is_said_once_and_the_quickstart_names_the_audit_key() -> None:
    text = README.read_text()
    assert text.count("needs an admin key") == 1
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    assert quickstart.count("tokenplane audit verify") == 1
    assert "governance.audit.key_file" in quickstart and "exits 3" in quickstart
