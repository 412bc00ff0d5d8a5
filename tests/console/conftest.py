"""A real gateway with traffic from three tenants, shared by the console's tests, and
the system's Chromium for the browser tests (Debian's package; ``scripts/test``
installs it). With CI=true a missing Chromium fails the browser tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.metering.conftest import pg_url, sink_target  # noqa: F401  (the ledger fixtures)

CHROMIUM = os.environ.get("TOKENPLANE_CHROMIUM", "/usr/bin/chromium")
MODEL = "sim-llama3-8b"


@dataclass
class Console:
    gw: GatewayThread
    admin: str  # an admin key
    acme: str  # acme's key, department research, app chat
    acme_search: str  # acme's key of the app search (no department)
    globex: str  # globex's key, app bot

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.gw.port}"

    def admin_api(self, path: str, key: str | None = None, **params: Any) -> Any:
        resp = httpx.get(self.base + path, params=params, timeout=30,
                         headers={"authorization": f"Bearer {key or self.admin}"})
        assert resp.status_code == 200, resp.text
        return resp.json()


def _traffic(gw: GatewayThread, key: str, n: int, *, stream: bool = False) -> int:
    with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
        for i in range(n):
            msgs: Any = [{"role": "system", "content": "You are terse."},
                         {"role": "user", "content": f"Question {i} about budgets?"}]
            if stream:
                list(c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8,
                                               stream=True))
            else:
                c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8)
    return n


def caught_up(gw: GatewayThread, events: int) -> None:
    """Wait (bounded) until the ledger flusher has written every journaled event: the
    flusher runs on its own timer, so this polls its counters."""
    deadline = time.monotonic() + 20
    stats = gw.gateway.meter.stats().as_dict()
    while time.monotonic() < deadline:
        stats = gw.gateway.meter.stats().as_dict()
        if stats["flushed"] >= events and stats["lag"] == 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"the ledger did not catch up: {stats}")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    cfg = sim_config(profile="instant")
    cfg["tenants"] = [{"name": "default"}, {"name": "acme"}, {"name": "globex"}]
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    cfg["slos"] = [  # one over every tenant (admin keys only), one over acme's traffic
        {"name": "all-available", "selector": {"model": MODEL}, "objective": 0.99,
         "slis": [{"kind": "availability"}]},
        {"name": "acme-fast", "selector": {"tenant": "acme"}, "objective": 0.95,
         "slis": [{"kind": "latency", "threshold": "5s"}]},
    ]
    gw = GatewayThread(cfg, tmp_path_factory.mktemp("console")).start()
    try:
        admin = gw.create_key("default", admin=True)
        acme = gw.create_key("acme", department="research", app="chat")
        search = gw.create_key("acme", app="search")
        globex = gw.create_key("globex", app="bot")
        n = _traffic(gw, acme, 4) + _traffic(gw, acme, 2, stream=True)
        n += _traffic(gw, search, 3) + _traffic(gw, globex, 5)
        caught_up(gw, n)
        yield Console(gw, admin, acme, search, globex)
    finally:
        gw.stop()


CJK_FONT_PACKAGE = "fonts-wqy-microhei"  # the one README names; scripts/test installs it


@pytest.fixture(scope="session")
def cjk_font() -> str:
    """A font with Chinese glyphs, as fontconfig sees it (Chromium asks fontconfig)."""
    found = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True,
                           text=True, check=False).stdout.strip() \
        if shutil.which("fc-list") else ""
    if not found:
        message = (f"no font with Chinese glyphs (apt-get install {CJK_FONT_PACKAGE}; "
                   "scripts/test does it)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found.splitlines()[0]


@pytest.fixture(scope="session")
def chromium() -> str:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        message = (f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; "
                   "scripts/test does it)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM
