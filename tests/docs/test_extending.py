"""docs/EXTENDING.md's worked examples run as they stand: each ``python`` block is
executed on its own, so an example that drifts from the code fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "EXTENDING.md"
SECTIONS = ("A routing scorer", "A PII recognizer", "A pipeline stage", "A limit kind",
            "An endpoint kind", "A wire dialect")


def _blocks() -> dict[str, str]:
    """The first ``python`` block of each ``## `` section, by section title."""
    out: dict[str, str] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        code = re.search(r"^```python\n(.*?)^```", body, flags=re.M | re.S)
        if code is not None:
            out[title.strip()] = code.group(1)
    return out


def test_every_extension_point_has_a_worked_example() -> None:
    assert sorted(_blocks()) == sorted(SECTIONS)


@pytest.mark.parametrize("section", SECTIONS)
def test_the_example_runs(section: str) -> None:
    code = _blocks()[section]
    namespace: dict[str, object] = {"__name__": f"extending_{section.split()[-2]}"}
    exec(compile(code, f"{DOC.name}: {section}", "exec"), namespace)


def test_the_files_it_points_at_exist() -> None:
    root = DOC.parents[1]
    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:tests|[a-z_]+)/[\w/]+\.py)", text))
    assert len(named) > 15
    missing = [p for p in sorted(named)
               if not (root / p).exists() and not (root / "src" / "tokenplane" / p).exists()]
    assert missing == []
