"""Pure routing policy code does not import the gateway's I/O or request path."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tokenplane.routing

FORBIDDEN = ("aiohttp", "httptools", "redis", "asyncpg", "sqlite3", "tokenplane.api",
             "tokenplane.pipeline", "tokenplane.upstream")
ROUTING = Path(tokenplane.routing.__file__).parent
PURE = sorted(p for p in ROUTING.glob("*.py"))


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_pure_modules_import_nothing_forbidden_directly() -> None:
    assert len(PURE) > 10
    bad = []
    for path in PURE:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.name}: {n}" for n in names if _forbidden(n)]
    assert bad == []


def test_pure_modules_import_nothing_forbidden_at_all() -> None:
    mods = [f"tokenplane.routing.{p.stem}" for p in PURE if p.stem != "__init__"]
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in mods)
        + f"bad = [m for m in sys.modules if any(m == f or m.startswith(f + '.') "
        f"for f in {FORBIDDEN!r})]\n"
        "print(','.join(sorted(bad)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == ""
