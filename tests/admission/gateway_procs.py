"""Gateway processes (``python -m tokenplane serve``) for the multi-process tests."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from tests.gateway.harness import free_port

MODEL = "sim-llama3-8b"


def write_config(home: Path, redis_url: str, admission: dict[str, Any],
                 profile: str = "llama3-8b-h100") -> Path:
    cfg = {
        "data_dir": str(home),
        "redis_url": redis_url,
        "admission": admission,
        "models": [{
            "alias": MODEL, "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 4096,
            "prices": {"input": "0.10", "output": "0.40"},
            "backends": [{"id": "sim", "type": "sim", "profile": profile, "replicas": 2}],
        }],
        "tenants": [{"name": "default"}],
        "observe": {"metrics": {"listen": None}},  # replicas side by side: no shared port
    }
    path = home / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class GatewayProcess:
    """One ``tokenplane serve`` process; ready once it printed its banner."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.port = free_port()
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "TOKENPLANE_REDIS_URL"}
        with self.log.open("ab") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tokenplane", "serve", "--config", str(self.config),
                "--port", str(self.port), stdout=asyncio.subprocess.PIPE, stderr=err, env=env)
        assert self.proc.stdout is not None
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            if not line:
                raise AssertionError(f"gateway exited early; see {self.log}:\n"
                                     + self.log.read_text()[-3000:])
            if b"tokenplane gateway on" in line:
                return

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self.proc = None


async def stream_chat(session: aiohttp.ClientSession, url: str, key: str, max_tokens: int,
                      messages: list[dict[str, str]]) -> dict[str, Any]:
    """One streamed chat request; returns status, error code, content chunks, finish."""
    async with session.post(url + "/chat/completions",
                            headers={"authorization": f"Bearer {key}"},
                            json={"model": MODEL, "messages": messages, "stream": True,
                                  "max_tokens": max_tokens}) as resp:
        if resp.status != 200:
            body = await resp.json()
            return {"status": resp.status, "code": body["error"]["code"],
                    "message": body["error"]["message"], "chunks": 0, "finish": None,
                    "max_tokens": max_tokens}
        chunks, finish = 0, None
        async for line in resp.content:
            if not line.startswith(b"data: {"):
                continue
            obj = orjson.loads(line[6:])
            for ch in obj.get("choices") or []:
                if ch.get("delta", {}).get("content"):
                    chunks += 1
                finish = ch.get("finish_reason") or finish
        return {"status": 200, "code": None, "chunks": chunks, "finish": finish,
                "max_tokens": max_tokens}


def ledger(home: Path, where: str = "1=1") -> list[dict[str, Any]]:
    db = sqlite3.connect(home / "ledger.db")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(f"SELECT * FROM usage_events WHERE {where}")]
    finally:
        db.close()
