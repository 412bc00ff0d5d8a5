"""Durability: many concurrent clients (stream and non-stream), ``kill -9`` of a gateway
process, restart, drain; the ledger then holds every request a client saw complete,
exactly once, and its rollups equal the raw sums. SQLite and the real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from openai import AsyncOpenAI
from typer.testing import CliRunner

from tests.gateway.gateway_process import GatewayProcess, create_key
from tests.gateway.ledger_checks import (
    assert_client_rollups_match,
    assert_rollups_match,
    read_ledger,
)
from tests.services import fresh_pg_schema
from tokenplane.cli.main import build_cli

MODEL = "sim-llama3-8b"
CLIENTS = 24

pytestmark = pytest.mark.timeout(240)


def _config(tmp: Path, ack: str = "written") -> Path:
    cfg = {
        "metering": {"ack": ack},
        "models": [{
            "alias": MODEL, "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 4096,
            "prices": {"input": "0.10", "cached_input": "0.05", "output": "0.40"},
            "backends": [{"id": "sim", "type": "sim", "profile": "llama3-8b-a100",
                          "replicas": 2}],
        }],
        "tenants": [{"name": "acme"}],
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class Load:
    """Clients in a loop until stopped; ``completed`` holds the request ids whose answer
    a client received in full (the body, or a stream up to ``[DONE]``)."""

    def __init__(self, base_url: str, key: str) -> None:
        self.client = AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=30)
        self.completed: list[str] = []
        self.failures = 0
        self.stop = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Event]] = []

    async def reached(self, n: int) -> None:
        ev = asyncio.Event()
        self._waiters.append((n, ev))
        self._done()
        await ev.wait()

    def _done(self) -> None:
        for n, ev in self._waiters:
            if len(self.completed) >= n:
                ev.set()

    async def _one(self, i: int) -> None:
        msgs = [{"role": "user", "content": f"client request {i}: tell me about ledgers"}]
        if i % 2:
            async with self.client.chat.completions.with_streaming_response.create(
                model=MODEL, messages=msgs, max_tokens=12, stream=True,
            ) as resp:
                rid = resp.headers["x-request-id"]
                async for line in resp.iter_lines():
                    if line == "data: [DONE]":
                        self.completed.append(rid)
                        break
        else:
            raw = await self.client.chat.completions.with_raw_response.create(
                model=MODEL, messages=msgs, max_tokens=12)
            raw.parse()
            self.completed.append(raw.headers["x-request-id"])
        self._done()

    async def _loop(self, c: int) -> None:
        i = c
        while not self.stop.is_set():
            try:
                await self._one(i)
            except Exception:
                self.failures += 1
                if self.failures > 10_000:
                    return
            i += CLIENTS

    async def run_until(self, stop_after: Callable[[], None], n: int) -> None:
        """Load until ``n`` completions, call ``stop_after`` (the crash), then stop."""
        tasks = [asyncio.create_task(self._loop(c)) for c in range(CLIENTS)]
        await self.reached(n)
        stop_after()
        self.stop.set()
        await asyncio.gather(*tasks)
        await self.client.close()


def _check(target: str, completed: set[str], may_extra: int) -> None:
    events, rollups = read_ledger(target)
    ids = [e["request_id"] for e in events]
    assert len(ids) == len(set(ids)), "a request is in the ledger twice"
    assert {e["attempt"] for e in events} == {0}
    missing = completed - set(ids)
    assert not missing, f"{len(missing)} completed requests missing from the ledger"
    # the ledger may also hold requests whose end the client never saw (in flight at
    # the crash), never more than were in flight
    assert len(set(ids) - completed) <= may_extra
    assert all(e["output_tokens"] > 0 for e in events if e["request_id"] in completed)
    assert_rollups_match(events, rollups)
    assert_client_rollups_match(target, events)


def _env(home: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    env["TOKENPLANE_HOME"] = str(home)
    if database_url:
        env["TOKENPLANE_DATABASE_URL"] = database_url
    return env


def _crash_restart_drain(tmp: Path, database_url: str | None, ack: str = "written") -> None:
    home = tmp / "home"
    env = _env(home, database_url)
    key = create_key(env, "acme", "durability")
    cfg, log = _config(tmp, ack), tmp / "gateway.log"
    ledger = database_url or str(home / "ledger.db")
    completed: set[str] = set()
    crashes = 0
    # The crash must leave acknowledged events in the journal only (not yet flushed to
    # the ledger), or the replay is not exercised. The flusher runs every 250 ms, so a
    # kill that lands just after a flush leaves nothing unflushed: crash again then.
    while True:
        crashes += 1
        gw = GatewayProcess(cfg, env, log)  # from the second on, replays the last crash
        try:
            load = Load(gw.base_url, key)
            asyncio.run(load.run_until(gw.kill9, 80))
            completed |= set(load.completed)
        finally:
            gw.close()
        assert load.failures > 0  # the crash hit requests in flight
        before, _ = read_ledger(ledger)
        if completed - {e["request_id"] for e in before}:
            break
        assert crashes < 3, "three crashes left no acknowledged event only in the journal"
    again = GatewayProcess(cfg, env, log)  # replays the dead writer's journal
    try:
        load = Load(again.base_url, key)
        asyncio.run(load.run_until(lambda: None, 20))
        completed |= set(load.completed)
        assert again.terminate() == 0
    finally:
        again.close()
    _check(ledger, completed, may_extra=CLIENTS * crashes)


@pytest.mark.parametrize("ack", ["written", "synced"])
def test_kill9_sqlite(tmp_path: Path, ack: str) -> None:
    """Nothing acknowledged is lost or doubled across kill -9, whether an answer waits
    for its usage record's write (the default) or for its fsync."""
    _crash_restart_drain(tmp_path, None, ack)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A DSN with a fresh ``schema=``, dropped afterwards. Fails in CI without PG."""
    with fresh_pg_schema("dur") as url:
        yield url


def test_kill9_postgres(tmp_path: Path, pg_url: str) -> None:
    _crash_restart_drain(tmp_path, pg_url)
    # the usage CLI reads the same PostgreSQL ledger ($TOKENPLANE_DATABASE_URL)
    result = CliRunner().invoke(build_cli(), ["usage", "--by", "app", "--format", "json"],
                                env={"TOKENPLANE_DATABASE_URL": pg_url})
    assert result.exit_code == 0, result.output
    events, _ = read_ledger(pg_url)
    rows = json.loads(result.output)
    assert [(r["app"], r["requests"]) for r in rows] == [("durability", len(events))]


def test_two_workers_share_a_data_dir(tmp_path: Path) -> None:
    """``serve --workers 2``: one worker is killed mid-load; the other keeps serving and
    drains on SIGTERM; a restart flushes the dead worker's journal. Nothing lost, nothing
    flushed twice."""
    home = tmp_path / "home"
    env = _env(home, None)
    key = create_key(env, "acme", "workers")
    cfg, log = _config(tmp_path), tmp_path / "gateway.log"
    completed: set[str] = set()
    gw = GatewayProcess(cfg, env, log, workers=2)
    try:
        workers = gw.worker_pids()
        assert len(workers) == 2
        load = Load(gw.base_url, key)

        async def crash_one_then_continue() -> None:
            loop_task = asyncio.create_task(load.run_until(lambda: None, 140))
            await load.reached(70)
            gw.kill9(workers[0])
            await loop_task

        asyncio.run(crash_one_then_continue())
        completed |= set(load.completed)
        assert gw.terminate() == 0  # the survivor drains
    finally:
        gw.close()
    journals = sorted(p.name for p in (home / "journal").iterdir())
    assert journals == ["w0", "w1"]
    again = GatewayProcess(cfg, env, log, workers=2)
    try:
        assert again.terminate() == 0
    finally:
        again.close()
    _check(str(home / "ledger.db"), completed, may_extra=CLIENTS)
