"""The ``layers`` import contract (pyproject.toml) names every package and top-level
module of tokenplane: one added without a layer would escape the contract."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tokenplane"


def test_every_top_level_name_has_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.replace("|", ":").split(":")}
    present = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert present <= named, sorted(present - named)
    assert named <= present, sorted(named - present)  # no layer names what is gone
