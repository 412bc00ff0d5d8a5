"""``serve --workers N`` without Redis holds limits across its workers exactly as one
process does (issue 13, item 15): the workers admit against one set of counters, kept
by the serve parent. Before, each worker counted alone (rpm 5 let 9 of 12 through with
two workers)."""

from __future__ import annotations

import http.client
import os
from pathlib import Path

import orjson
import pytest
import yaml

from tests.gateway.gateway_process import GatewayProcess, cli, create_key

MODEL = "sim-llama3-8b"

pytestmark = pytest.mark.timeout(180)


def _request(port: int, key: str) -> tuple[int, str, str]:
    """One chat request on a connection of its own (so SO_REUSEPORT spreads them over
    the workers): status, error code, and the serving worker's request-id prefix."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions", body=orjson.dumps({
            "model": MODEL, "max_tokens": 4,
            "messages": [{"role": "user", "content": "hello"}]}),
            headers={"authorization": f"Bearer {key}", "content-type": "application/json"})
        resp = conn.getresponse()
        body = orjson.loads(resp.read())
        rid = resp.getheader("x-request-id") or ""
    finally:
        conn.close()
    code = (body.get("error") or {}).get("code") or "" if isinstance(body, dict) else ""
    return resp.status, code, rid[:16]  # req_ + the worker's 12 hex digits


def test_two_workers_without_redis_admit_exactly_the_limit(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    env["TOKENPLANE_HOME"] = str(home)
    cfg = {
        "models": [{
            "alias": MODEL, "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 4096,
            "backends": [{"id": "sim", "type": "sim", "profile": "instant", "replicas": 1}],
        }],
        "tenants": [{"name": "acme"}],
    }
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(cfg))
    key = create_key(env, "acme", "app")
    cli(env, "limits", "set", "--tenant", "acme", "--rpm", "5")
    gw = GatewayProcess(config, env, tmp_path / "gateway.log", workers=2)
    try:
        assert len(gw.worker_pids()) == 2
        results = [_request(gw.port, key) for _ in range(12)]
        # until both workers have answered (each connection lands on one by hash)
        while len({r[2] for r in results}) < 2 and len(results) < 60:
            results.append(_request(gw.port, key))
        assert gw.terminate() == 0
    finally:
        gw.close()
    assert len({r[2] for r in results}) == 2, "every request went to one worker"
    admitted = [r for r in results if r[0] == 200]
    refused = [r for r in results if r[0] != 200]
    assert len(admitted) == 5, results
    assert {(r[0], r[1]) for r in refused} == {(429, "rate_limit_exceeded")}


def _sockets(pid: int) -> int:
    """Open sockets of a process (a held request holds two: client and upstream)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except FileNotFoundError:  # closed meanwhile
            continue
    return count


def test_a_killed_worker_gives_its_slots_back_to_its_siblings(tmp_path: Path) -> None:
    """``kill -9`` of one worker holding requests against a hung upstream: its
    ``max_concurrent`` slots in the parent's counters are leases it no longer renews,
    so they come back within ``lease_s``; the survivor's stay held."""
    import asyncio
    import time

    import aiohttp

    from tests.admission.held_upstream import HeldUpstream

    slots = 8
    upstream = HeldUpstream().start()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    env["TOKENPLANE_HOME"] = str(home)
    cfg = {
        "admission": {"lease_s": 2.0, "heartbeat_s": 0.5, "predict_output": False,
                      "default_output_tokens": 4},
        "models": [{"alias": "held", "tokenizer": "cl100k_base", "context_window": 4096,
                    "backends": [{"id": "h", "type": "vllm", "base_url": upstream.base_url}]}],
        "tenants": [{"name": "acme"}],
    }
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(cfg))
    key = create_key(env, "acme", "app")
    cli(env, "limits", "set", "--tenant", "acme", "--max-concurrent", str(slots))
    gw = GatewayProcess(config, env, tmp_path / "gateway.log", workers=2)
    base = f"http://127.0.0.1:{gw.port}"
    auth = {"authorization": f"Bearer {key}"}

    async def reserved(session: aiohttp.ClientSession) -> int:
        async with session.get(f"{base}/admin/v1/tenants/acme/budget", headers=auth) as r:
            body = await r.json()
        return sum(lim["reserved"] for sc in body["scopes"] for lim in sc["limits"])

    async def hold(session: aiohttp.ClientSession) -> int:
        async with session.post(f"{base}/v1/chat/completions", headers=auth, json={
                "model": "held", "max_tokens": 4,
                "messages": [{"role": "user", "content": "hi"}]}) as resp:
            await resp.read()
            return resp.status

    async def scenario() -> tuple[int, float]:
        async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, limit=0)) as session:
            tasks = [asyncio.create_task(hold(session)) for _ in range(slots)]
            assert await asyncio.to_thread(upstream.wait_requests, slots)
            assert await reserved(session) == slots
            gw.kill9(max(gw.worker_pids(), key=_sockets))  # the busier worker
            killed = time.monotonic()
            # the dead worker's clients see their connections reset at once
            done, _ = await asyncio.wait(tasks, timeout=1.0)
            lost = sum(1 for t in done if t.exception() is not None)
            while await reserved(session) > slots - lost:
                assert time.monotonic() - killed < 10, "the dead worker's slots stay held"
                await asyncio.sleep(0.2)
            freed_after = time.monotonic() - killed
            await asyncio.sleep(1.5 * 2.0)  # the survivor's leases are renewed meanwhile
            assert await reserved(session) == slots - lost
            upstream.release()
            await asyncio.gather(*tasks, return_exceptions=True)
            return lost, freed_after

    try:
        lost, freed_after = asyncio.run(scenario())
    finally:
        upstream.release()
        gw.close()
        upstream.stop()
    assert lost > 0
    assert freed_after < 2.0 + 2.0
