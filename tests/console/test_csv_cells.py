"""CSV exports never carry a formula (issue 33, finding 9): an app named ``=...``,
``+...``, ``-...`` or ``@...`` is written with a leading ``'`` in the console's
``usage.csv`` and in ``/admin/v1/usage?format=csv`` (OWASP's neutralisation), while
figures stay numbers."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.console.conftest import caught_up
from tests.console.test_console_http import csrf_of
from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.csv_cells import safe_cell

MODEL = "sim-llama3-8b"
NAMES = ('=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)")


def test_safe_cell() -> None:
    assert [safe_cell(n) for n in NAMES] == ["'" + n for n in NAMES]
    assert safe_cell("\tx") == "'\tx" and safe_cell("\rx") == "'\rx"
    assert safe_cell("acme") == "acme" and safe_cell("a=b") == "a=b"
    assert safe_cell(-5) == -5 and safe_cell(1.5) == 1.5 and safe_cell(None) is None


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayThread, str]]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("csv"))).start()
    try:
        for name in NAMES:
            with openai.OpenAI(base_url=g.base_url, api_key=g.create_key("acme", app=name),
                               max_retries=0) as c:
                c.chat.completions.create(model=MODEL, max_tokens=3, messages=[
                    {"role": "user", "content": "hello"}])
        caught_up(g, len(NAMES))
        yield g, g.create_key("default", admin=True)
    finally:
        g.stop()


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_admin_usage_csv_neutralises_formulas(gw: tuple[GatewayThread, str]) -> None:
    g, admin = gw
    base = g.base_url.removesuffix("/v1")
    r = httpx.get(f"{base}/admin/v1/usage", params={"format": "csv", "by": "app"},
                  headers={"authorization": f"Bearer {admin}"}, timeout=30)
    assert r.status_code == 200, r.text
    cells = _cells(r.text)
    for name in NAMES:
        assert "'" + name in cells and name not in cells
    assert not [c for c in cells if c[:1] in "=+-@"]


def test_console_usage_csv_neutralises_formulas(gw: tuple[GatewayThread, str]) -> None:
    g, admin = gw
    base = f"http://127.0.0.1:{g.port}"
    with httpx.Client(base_url=base, timeout=30) as h:
        form = h.get("/console/login")
        h.post("/console/login", data={"key": admin, "csrf": csrf_of(form.text)},
               headers={"origin": base})
        r = h.get("/console/usage.csv", params={"tenant": "acme", "department": "~"})
        assert r.status_code == 200, r.text
    cells = _cells(r.text)
    for name in NAMES:
        assert "'" + name in cells and name not in cells
    assert not [c for c in cells if c[:1] in "=+-@"]
