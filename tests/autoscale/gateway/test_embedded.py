"""The embedded actuator under real traffic: a burst against a gateway serving a
simulated pool (in-process engines, the Llama-3-8B A100 profile) makes the autoscaler
start a replica, which takes traffic once its cold start is over, and later drain
and stop it; the official ``openai`` client sees no failed request throughout. A
warm replica is promoted instead of cold-starting one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.gateway.harness import GatewayThread
from tokenplane.autoscale.gateway.controller import AutoscaleController
from tokenplane.autoscale.gateway.embedded import EmbeddedActuator, EmbeddedPool

MSGS: list[Any] = [{"role": "user", "content": "Tell me about autoscaling."}]


def autoscaled(**pool: Any) -> dict[str, Any]:
    """One alias on one in-process replica, autoscaled every 0.2 s with a cold start of
    0.5 s, 2 s of cooldown and a replica capacity of 200 tokens/s (so a burst of 16
    long answers needs two replicas). The steady trickle of a few requests a second
    would keep a default pool's headroom for the arrivals' spread (3 spreads of a
    handful of arrivals) above one such replica: the spread asked for here is 1."""
    spec: dict[str, Any] = {
        "min_replicas": 1, "max_replicas": 2, "max_step": 1, "cold_start": 0.5,
        "scale_up_window": 0, "scale_down_window": 1, "cooldown": 2, "warm_max": 0,
        "promote": 0, "replica_tokens_per_s": 200, "price_per_replica_hour": 1.0,
        "arrival_sigmas": 1,
    }
    spec.update(pool)
    return {
        "models": [{
            "alias": "chat", "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 4096,
            "backends": [{"id": "sim", "type": "sim", "profile": "llama3-8b-a100",
                          "replicas": 1}],
        }],
        "tenants": [{"name": "default"}],
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
        "autoscale": {"interval": 0.2, "pools": {"chat": spec}},
    }


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], GatewayThread]]:
    running: list[GatewayThread] = []

    def go(cfg: dict[str, Any]) -> GatewayThread:
        gw = GatewayThread(cfg, tmp_path / f"gw{len(running)}").start()
        running.append(gw)
        return gw

    yield go
    for gw in running:
        if gw.server is not None:
            gw.stop()


def controller(gw: GatewayThread) -> AutoscaleController:
    ctl = gw.gateway.autoscale
    assert ctl is not None
    return ctl


def embedded(gw: GatewayThread) -> EmbeddedPool:
    act = controller(gw).pools["chat"].actuator
    assert isinstance(act, EmbeddedActuator)
    return act.pools["chat"]


def wait(gw: GatewayThread, pool: EmbeddedPool, cond: Callable[[EmbeddedPool], bool],
         timeout: float = 60) -> None:
    """Block until ``cond`` holds, checked at each change of the pool (on its loop)."""
    gw.call(pool.wait_for(cond), timeout)


class Traffic:
    """Requests from threads with the official client; every outcome kept."""

    def __init__(self, gw: GatewayThread, key: str) -> None:
        self.client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0,
                                    timeout=60)
        self.errors: list[BaseException] = []
        self.ok = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._steady: threading.Thread | None = None
        self.stop = threading.Event()

    def _one(self, max_tokens: int, stream: bool) -> bool:
        try:
            if stream:
                chunks = list(self.client.chat.completions.create(
                    model="chat", messages=MSGS, max_tokens=max_tokens, stream=True,
                    stream_options={"include_usage": True}))
                usage = [c.usage for c in chunks if c.usage is not None]
                assert usage and usage[0].completion_tokens == max_tokens
            else:
                r = self.client.chat.completions.create(model="chat", messages=MSGS,
                                                        max_tokens=max_tokens)
                assert r.usage is not None and r.usage.completion_tokens == max_tokens
        except BaseException as exc:  # every failure is the test's finding
            with self._lock:  # the first few kept: a loop that fails fast stays bounded
                if len(self.errors) < 20:
                    self.errors.append(exc)
            return False
        with self._lock:
            self.ok += 1
        return True

    def burst(self, n: int, max_tokens: int) -> None:
        for i in range(n):
            t = threading.Thread(target=self._one, args=(max_tokens, i % 2 == 0))
            t.start()
            self._threads.append(t)

    def steady(self) -> None:
        """One short request after another until ``stop``."""
        def loop() -> None:
            while not self.stop.is_set():
                if not self._one(8, False):
                    self.stop.wait(0.05)  # a failing gateway is not hammered
        t = threading.Thread(target=loop)
        t.start()
        self._threads.append(t)
        self._steady = t

    def join_bursts(self) -> None:
        for t in self._threads:
            if t is not self._steady:
                t.join(120)

    def join(self) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(120)


def test_a_burst_starts_a_replica_and_the_calm_stops_it(
        start: Callable[[dict[str, Any]], GatewayThread]) -> None:
    gw = start(autoscaled())
    pool = embedded(gw)
    traffic = Traffic(gw, gw.create_key("default"))
    traffic.steady()  # through the whole test, the drain included
    traffic.burst(16, 200)
    # the burst's tokens in flight need two replicas: one starts, serves after 0.5 s
    wait(gw, pool, lambda p: p.count("serving") == 2)
    assert pool.started == 1
    traffic.burst(8, 64)  # a second wave finds two replicas to route to
    traffic.join_bursts()
    # after the bursts and the cooldown, the newer replica drains and stops
    wait(gw, pool, lambda p: p.stopped == 1 and len(p.replicas) == 1)
    assert [r.phase for r in pool.replicas.values()] == ["serving"]
    # read now: the steady trickle goes on, and on a loaded machine a slow step can
    # look like demand again once the one replica is left
    decisions = list(controller(gw).decisions.recent)
    traffic.join()
    assert not traffic.errors, traffic.errors[:3]
    assert traffic.ok >= 24
    assert [(d["serving_from"], d["serving_to"], d["direction"]) for d in decisions] == [
        (1, 2, "up"), (2, 1, "down")]
    # the burst's tokens (or the requests they left waiting in the engine) decided it
    assert decisions[0]["reasons"][0] in ("token_demand", "queue")
    assert decisions[0]["inputs"]["output_tokens_in_flight"] > 0
    gw.stop()
    rows = gw.ledger_rows()
    assert rows and all(r["status"] == "ok" for r in rows)
    backends = {r["backend"] for r in rows}
    assert backends == {"sim/0", "sim/1"}  # the started replica served requests


def test_a_warm_replica_is_promoted_instead_of_a_cold_start(
        start: Callable[[dict[str, Any]], GatewayThread]) -> None:
    gw = start(autoscaled(warm_min=1, warm_max=1, max_replicas=3))
    pool = embedded(gw)
    # the warm pool is filled first: one replica loads and waits, not routed
    wait(gw, pool, lambda p: p.count("warm") == 1)
    warm = next(r.id for r in pool.replicas.values() if r.phase == "warm")
    assert warm not in gw.gateway.routing.live.by_id  # type: ignore[union-attr]
    traffic = Traffic(gw, gw.create_key("default"))
    traffic.burst(16, 200)
    # the burst promotes it (no cold start: promote is 0 here), and the warm pool is
    # refilled behind it
    wait(gw, pool, lambda p: p.replicas[warm].phase == "serving")
    ups = [d for d in controller(gw).decisions.recent if d["direction"] == "up"]
    assert "warm_promotion" in ups[0]["reasons"]
    assert (ups[0]["warm_from"], ups[0]["serving_from"]) == (1, 1)
    traffic.burst(8, 64)
    traffic.join()
    assert not traffic.errors, traffic.errors[:3]
    gw.stop()
    assert warm in {r["backend"] for r in gw.ledger_rows()}  # it served once promoted


def test_a_drained_replica_finishes_its_streams_first(
        start: Callable[[dict[str, Any]], GatewayThread]) -> None:
    """Scale-down while streams are running on the replica that goes: they finish
    whole, then its engine stops (decisions an hour apart: the test drives it)."""
    cfg = autoscaled(cold_start=0)
    cfg["autoscale"]["interval"] = "1h"
    gw = start(cfg)
    pool = embedded(gw)
    gw.call(controller(gw).wait_rounds(1))  # its first round (at start) is behind us
    act = controller(gw).pools["chat"].actuator
    gw.call(act.scale_to("chat", 2, 0))
    wait(gw, pool, lambda p: p.count("serving") == 2)
    client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("default"),
                           max_retries=0, timeout=60)
    streams = [client.chat.completions.create(
        model="chat", messages=MSGS, max_tokens=300, stream=True,
        stream_options={"include_usage": True}) for _ in range(6)]
    firsts = [next(iter(s)) for s in streams]  # every stream has started
    assert all(f.choices for f in firsts)
    newest = gw.gateway.pools["chat"].endpoints[-1]
    assert newest.id == "sim/1" and newest.in_flight > 0  # least-loaded routing spread them
    gw.call(act.scale_to("chat", 1, 0))
    assert pool.replicas["sim/1"].phase == "draining"
    for s in streams:
        usage = [c.usage for c in s if c.usage is not None]
        assert usage and usage[0].completion_tokens == 300  # whole, none cut
    wait(gw, pool, lambda p: "sim/1" not in p.replicas)
    assert pool.stopped == 1
    assert [e.id for e in gw.gateway.pools["chat"].endpoints] == ["sim/0"]
