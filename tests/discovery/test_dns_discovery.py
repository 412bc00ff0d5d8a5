"""Backends discovered by DNS: A records (the system's resolver, ``localhost``) and
SRV records asked of a local DNS server; replicas join after their first healthy
scrape and drain when their records go, while requests through the gateway
(official ``openai`` client) keep succeeding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.discovery.dns_server import DnsServer
from tests.discovery.engines import EngineFarm, free_port_on
from tests.discovery.load import Load, in_pool, routable, served, wait_for
from tests.gateway.harness import GatewayThread

ALIAS = "llama"
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


@pytest.fixture
def farm() -> Iterator[EngineFarm]:
    f = EngineFarm(ALIAS, profile="llama3-8b-a100")
    yield f
    f.close()


@pytest.fixture
def dns_server() -> Iterator[DnsServer]:
    s = DnsServer().start()
    yield s
    s.stop()


def config(discovery: dict[str, Any]) -> dict[str, Any]:
    return {
        "models": [{"alias": ALIAS, "tokenizer": "cl100k_base", "context_window": 4096,
                    "backends": [{"id": "engine", "type": "vllm", "discovery": discovery}]}],
        "routing": {"scrape_interval_s": 0.2},
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }


def test_a_records_of_localhost(farm: EngineFarm, tmp_path: Path) -> None:
    port = free_port_on("127.0.0.1")
    farm.start("127.0.0.1", port)
    gw = GatewayThread(config({"kind": "dns", "name": "localhost", "port": port,
                               "interval_s": 0.2}), tmp_path).start()
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {f"engine/127.0.0.1:{port}"},
                 "localhost's replica")
        c = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key(), max_retries=0)
        r = c.chat.completions.create(model=ALIAS, max_tokens=3,
                                      messages=[{"role": "user", "content": "hi"}])
        assert r.usage is not None and r.usage.completion_tokens == 3
        c.close()
    finally:
        gw.stop()


def test_srv_records_join_and_drain_without_failed_requests(
    farm: EngineFarm, dns_server: DnsServer, tmp_path: Path,
) -> None:
    port = free_port_on(*HOSTS)
    other = free_port_on(*HOSTS)  # SRV records carry a port each
    ids = [f"engine/{HOSTS[0]}:{port}", f"engine/{HOSTS[1]}:{other}",
           f"engine/{HOSTS[2]}:{port}"]
    name = "_http._tcp.engine.test"
    farm.start(HOSTS[0], port)
    dns_server.set(name, "SRV", [f"0 5 {port} pod-a.engine.test."])
    dns_server.set("pod-a.engine.test", "A", [HOSTS[0]])
    gw = GatewayThread(config({"kind": "dns", "name": name, "record": "SRV",
                               "interval_s": 0.1, "nameserver": dns_server.address}),
                       tmp_path).start()
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first replica")
        load = Load(gw, gw.create_key("default", app="dns"), ALIAS).start()
        try:
            farm.start(HOSTS[1], other)
            farm.start(HOSTS[2], port)
            dns_server.set("pod-b.engine.test", "A", [HOSTS[1]])
            dns_server.set(name, "SRV", [f"0 5 {port} pod-a.engine.test.",
                                         f"0 5 {other} pod-b.engine.test.",
                                         f"0 5 {port} {HOSTS[2]}.",
                                         f"10 5 {port} backup.engine.test."])
            wait_for(gw, lambda: routable(gw, ALIAS) == set(ids), "three replicas")
            wait_for(gw, lambda: all(served(gw, ALIAS).get(i, 0) > 0 for i in ids),
                     "every replica to serve")
            dns_server.set(name, "SRV", [f"0 5 {other} pod-b.engine.test."])
            wait_for(gw, lambda: in_pool(gw, ALIAS) == {ids[1]}, "the drains")
            farm.stop(HOSTS[0], port)
            farm.stop(HOSTS[2], port)
            before = load.ok
            wait_for(gw, lambda: load.ok >= before + 6, "requests on the last replica")
        finally:
            load.stop()
        assert load.failures == []
        assert load.ok >= 10
        # the lower-priority SRV record was never used
        assert all("backup" not in i for i in served(gw, ALIAS))
    finally:
        gw.stop()


def test_a_records_from_a_nameserver_and_a_name_that_goes_away(
    farm: EngineFarm, dns_server: DnsServer, tmp_path: Path,
) -> None:
    port = free_port_on(*HOSTS[:2])
    farm.start(HOSTS[0], port)
    farm.start(HOSTS[1], port)
    dns_server.set("engine.test", "A", HOSTS[:2])
    gw = GatewayThread(config({"kind": "dns", "name": "engine.test", "port": port,
                               "interval_s": 0.1, "nameserver": dns_server.address}),
                       tmp_path).start()
    try:
        want = {f"engine/{h}:{port}" for h in HOSTS[:2]}
        wait_for(gw, lambda: routable(gw, ALIAS) == want, "both replicas")
        dns_server.records.clear()  # NXDOMAIN: the name has no replicas any more
        wait_for(gw, lambda: in_pool(gw, ALIAS) == set(), "every replica to drain")
        c = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key(), max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            c.chat.completions.create(model=ALIAS, max_tokens=3,
                                      messages=[{"role": "user", "content": "hi"}])
        assert err.value.status_code == 503
        assert err.value.body["code"] == "no_upstream_available"  # type: ignore[index]
        c.close()
    finally:
        gw.stop()
