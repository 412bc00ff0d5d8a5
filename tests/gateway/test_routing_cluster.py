"""Routing over real HTTP: three simulated engine servers (separate processes) behind
the gateway; one is killed mid-run and restarted on its port."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread, free_port
from tests.gateway.sim_process import start_sim, stop_sim
from tokenplane.routing.endpoint import BREAKER_CLOSED, BREAKER_OPEN

ALIAS = "sim-llama3-8b"


class SimProcess:
    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SimProcess:
        self.proc, _ = start_sim(port=self.port)
        return self

    def ready(self) -> None:
        """``start`` returns once the replica listens (its readiness line)."""
        assert self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None:
            stop_sim(self.proc, kill=True)


@pytest.fixture()
def sims() -> Iterator[list[SimProcess]]:
    procs = [SimProcess(free_port()).start() for _ in range(3)]
    try:
        for p in procs:
            p.ready()
        yield procs
    finally:
        for p in procs:
            p.kill()


def _config(sims: list[SimProcess], **routing: Any) -> dict[str, Any]:
    return {
        "models": [{
            "alias": ALIAS, "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 8192,
            "prices": {"input": "0.10", "output": "0.40"},
            "backends": [{"id": f"r{i}", "type": "vllm", "base_url": f"http://127.0.0.1:{s.port}",
                          "model": ALIAS} for i, s in enumerate(sims)],
        }],
        "routing": {"scrape_interval_s": 0.2, "scrape_timeout_s": 0.5,
                    "breaker": {"consecutive_failures": 2, "open_s": 0.3, "max_open_s": 0.6},
                    **routing},
    }


def wait_for(cond: Callable[[], bool], timeout: float = 20) -> None:
    """Repeats ``cond`` until it holds. Each call does work that moves the gateway on
    (a scrape, a request), so there is nothing to sleep for; the timeout only ends a
    hung test."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")


def _one(client: httpx.Client, key: str, i: int) -> tuple[str, int, int, str]:
    """(request id, status, content chunks before any error, kind)."""
    body = {"model": ALIAS, "max_tokens": 4,
            "messages": [{"role": "user", "content": f"request {i} " + "word " * (i % 40)}]}
    headers = {"authorization": f"Bearer {key}"}
    if i % 2 == 0:
        r = client.post("/chat/completions", json=body, headers=headers)
        return r.headers.get("x-request-id", ""), r.status_code, 0, "json"
    body["stream"] = True
    chunks, failed = 0, False
    with client.stream("POST", "/chat/completions", json=body, headers=headers) as r:
        rid, status = r.headers.get("x-request-id", ""), r.status_code
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            obj = json.loads(line[6:])
            if "error" in obj:
                failed = True
            elif any((ch.get("delta") or {}).get("content") for ch in obj.get("choices") or ()):
                chunks += 1
    return rid, (599 if failed else status), chunks, "stream"


def test_scraper_reads_a_sim_servers_metrics(sims: list[SimProcess], tmp_path: Path) -> None:
    gw = GatewayThread(_config(sims, scrape_interval_s=0), tmp_path).start()
    try:
        routing = gw.gateway.routing
        assert routing is not None
        key = gw.create_key("default", app="scrape")
        with httpx.Client(base_url=gw.base_url, timeout=30) as c:
            for i in range(6):
                assert _one(c, key, i * 2)[1] == 200
        gw.call(routing.scraper.scrape_once())
        live = routing.live.by_id
        for i in range(3):
            m = live[f"r{i}"].scraped
            assert m is not None and m.flavour == "vllm"
            assert m.num_running == 0 and m.kv_usage is not None
            assert live[f"r{i}"].healthy
        total = sum((live[f"r{i}"].scraped.prompt_tokens_total or 0)  # type: ignore[union-attr]
                    for i in range(3))
        assert total > 0
    finally:
        gw.stop()


def test_kill_a_replica_mid_run_no_retryable_failure_no_double_billing(
    sims: list[SimProcess], tmp_path: Path
) -> None:
    # health checks every second: requests do reach the dead replica before they notice
    gw = GatewayThread(_config(sims, scrape_interval_s=1.0), tmp_path).start()
    routing = gw.gateway.routing
    assert routing is not None
    key = gw.create_key("default", app="kill")
    victim = sims[1]
    results: list[tuple[str, int, int, str]] = []
    lock = threading.Lock()
    done_before_kill = threading.Event()

    def worker(n: int, start: int) -> None:
        with httpx.Client(base_url=gw.base_url, timeout=30) as c:
            for i in range(start, start + n):
                r = _one(c, key, i)
                with lock:
                    results.append(r)
                    if len(results) >= 60:
                        done_before_kill.set()

    try:
        with ThreadPoolExecutor(4) as pool:
            futs = [pool.submit(worker, 60, k * 1000) for k in range(4)]
            assert done_before_kill.wait(60)
            victim.kill()
            for f in futs:
                f.result()
        victim_ep = routing.live.by_id["r1"]
        # the dead replica was ejected: failed health check and open breaker
        def ejected() -> bool:
            gw.call(routing.scraper.scrape_once())  # its health check fails now
            return bool(gw.call(_ejected(routing, "r1")))

        wait_for(ejected)
        text = gw.gateway.metrics.render().decode()
        assert f'tokenplane_endpoint_healthy{{endpoint="r1",model="{ALIAS}"}} 0.0' in text
        served_before = routing.live.by_id["r1"].endpoint.served
        victim.start().ready()  # same port
        with httpx.Client(base_url=gw.base_url, timeout=30) as c:
            i = 10_000

            def readmitted() -> bool:
                nonlocal i
                i += 2
                assert _one(c, key, i)[1] == 200
                gw.call(routing.scraper.scrape_once())
                return bool(victim_ep.endpoint.served > served_before and gw.call(
                    _state(routing, "r1")) == BREAKER_CLOSED)

            wait_for(readmitted)
    finally:
        gw.stop()
    assert len(results) == 240
    for rid, status, chunks, kind in results:
        # a failure is only allowed for a stream that had already sent tokens
        assert status == 200 or (kind == "stream" and chunks > 0), (rid, status, kind)
    rows = gw.ledger_rows("app = 'kill'")
    ok: dict[str, int] = {}
    for r in rows:
        if r["status"] == "ok":
            ok[r["request_id"]] = ok.get(r["request_id"], 0) + 1
        elif r["first_token_ts"] is None:  # failed before any token: billed zero
            assert r["input_tokens"] == 0 and r["output_tokens"] == 0 and not r["cost_micros"]
    assert all(n == 1 for n in ok.values())  # never billed twice
    retried = [r for r in rows if r["backend"] == "r1" and r["status"] == "error"]
    assert retried  # attempts did fail on the dead replica, and were retried elsewhere
    assert {rid for rid, status, _, _ in results if status == 200} <= set(ok)


def _ejected(routing: Any, eid: str) -> Any:
    async def check() -> bool:
        le = routing.live.by_id[eid]
        return bool(not le.healthy and le.breaker.state(time.monotonic()) == BREAKER_OPEN)
    return check()


def _state(routing: Any, eid: str) -> Any:
    async def get() -> str:
        return str(routing.live.by_id[eid].breaker.state(time.monotonic()))
    return get()


def test_fallback_to_another_alias_when_the_primary_is_down(tmp_path: Path) -> None:
    dead = [{"id": f"dead{i}", "type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}"}
            for i in range(2)]
    cfg = {
        "models": [
            {"alias": "local", "tokenizer": "cl100k_base", "backends": dead,
             "fallbacks": ["hosted"]},
            {"alias": "hosted", "tokenizer": "cl100k_base",
             "backends": [{"id": "api", "type": "sim", "profile": "instant"}]},
        ],
        "routing": {"scrape_interval_s": 0, "breaker": {"consecutive_failures": 1,
                                                        "open_s": 60}},
    }
    gw = GatewayThread(cfg, tmp_path).start()
    key = gw.create_key("default", app="fb")
    body = {"model": "local", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=gw.base_url, timeout=30) as c:
        ids = []
        for _ in range(3):
            r = c.post("/chat/completions", json=body, headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
            ids.append(r.headers["x-request-id"])
    gw.stop()
    rows = gw.ledger_rows("app = 'fb'")
    ok = [r for r in rows if r["status"] == "ok"]
    assert sorted(r["request_id"] for r in ok) == sorted(ids)
    assert all(r["model"] == "hosted" and r["backend"] == "api/0" for r in ok)
    assert all("fallback" in r["flags"] for r in ok)
    errors = [r for r in rows if r["status"] != "ok"]
    # the first request tried both dead replicas (billed zero); then both breakers
    # were open and the others went straight to the fallback alias
    assert sorted(r["backend"] for r in errors) == ["dead0", "dead1"]
    assert all(r["input_tokens"] == 0 and r["output_tokens"] == 0 for r in errors)
    assert {r["request_id"] for r in errors} == {ids[0]}
