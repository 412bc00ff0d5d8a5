"""The project's simulated engine, recording request bodies (``record_bodies=True``,
``GET /sim/requests``), behind the gateway: masked and tokenized values never reach it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from tests.gateway.harness import GatewayThread, free_port
from tests.governance.gw_helpers import ID_CARD, PII, PII_TEXT, chat, client
from tokenplane.config.schema import ModelConfig
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.http_server import build_engine_app
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.model_counters import ModelCounters


class RecordingSim:
    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> RecordingSim:
        self._thread.start()

        async def up() -> None:
            mc = ModelConfig.model_validate({"alias": "sim", "chat_template": "llama3",
                                             "backends": [{"type": "sim"}]})
            counters = ModelCounters([mc])
            svc = EngineService(get_profile("instant"), counters.tokenizer("sim"),
                                counters.prompt_ids("sim"), "sim", record_bodies=True)
            self._runner = web.AppRunner(build_engine_app([svc]), handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)
        return self

    def recorded(self) -> list[dict[str, Any]]:
        r = httpx.get(f"http://127.0.0.1:{self.port}/sim/requests", timeout=10)
        assert r.status_code == 200
        out: list[dict[str, Any]] = r.json()
        return out

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayThread, RecordingSim]]:
    sim = RecordingSim().start()
    cfg = {
        "models": [{"alias": "echo", "tokenizer": "cl100k_base", "chat_template": "llama3",
                    "backends": [{"type": "vllm", "model": "sim",
                                  "base_url": f"http://127.0.0.1:{sim.port}"}]}],
        "tenants": [{"name": "default"}, {"name": "acme"}],
        "governance": {"pii": {"prompt": {"default": "mask"}}, "overrides": [
            {"tenant": "acme", "pii": {"prompt": {"default": "tokenize"}}}]},
    }
    gw = GatewayThread(cfg, Path(tmp_path_factory.mktemp("simrec"))).start()
    try:
        yield gw, sim
    finally:
        gw.stop()
        sim.stop()


@pytest.mark.parametrize("tenant", ["default", "acme"])
def test_recording_engine_never_sees_the_values(
        env: tuple[GatewayThread, RecordingSim], tenant: str) -> None:
    gw, sim = env
    c = client(gw, gw.create_key(tenant))
    chat(c, PII_TEXT, max_tokens=8)
    for _ in c.chat.completions.create(model="echo", stream=True, max_tokens=8, messages=[
            {"role": "system", "content": f"customer {ID_CARD}"},
            {"role": "user", "content": PII_TEXT}]):
        pass
    seen = sim.recorded()[-2:]
    assert len(seen) == 2
    raw = httpx.get(f"http://127.0.0.1:{sim.port}/sim/requests", timeout=10).text
    for value in PII:
        assert value not in raw
    last_user = seen[0]["messages"][-1]["content"]
    if tenant == "acme":
        assert "<CN_ID_CARD_1>" in last_user
    else:
        assert "110105********002X" in last_user
