"""The admin API (/admin/v1): CRUD of the organisation, keys and limits, budget status,
and tenant isolation; and the ``tokenplane limits`` CLI against a running gateway."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config

MODEL = "sim-llama3-8b"
MESSAGES: list[Any] = [{"role": "user", "content": "Hello there."}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["admission"] = {"limits_reload_s": 0}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("admin"))).start()
    yield g
    g.stop()


def _admin(gw: GatewayThread) -> httpx.Client:
    key = gw.create_key("ops", admin=True)
    return httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1",
                        headers={"authorization": f"Bearer {key}"}, timeout=30)


def test_org_keys_and_limits_crud(gw: GatewayThread) -> None:
    admin = _admin(gw)
    assert admin.post("/tenants", json={"name": "globex"}).status_code == 201
    assert "globex" in [t["name"] for t in admin.get("/tenants").json()["data"]]
    assert admin.post("/tenants/globex/departments", json={"name": "rnd"}).status_code == 201
    assert admin.post("/tenants/globex/apps",
                      json={"name": "bot", "department": "rnd"}).status_code == 201
    assert [d["name"] for d in admin.get("/tenants/globex/departments").json()["data"]] == \
        ["rnd"]
    assert admin.get("/tenants/globex/apps").json()["data"][0]["department"] == "rnd"
    created = admin.post("/tenants/globex/keys", json={"department": "rnd", "app": "bot"})
    assert created.status_code == 201
    key, key_id = created.json()["key"], created.json()["id"]
    listed = admin.get("/tenants/globex/keys").json()["data"]
    assert [k["id"] for k in listed] == [key_id] and "key" not in listed[0]

    put = admin.put("/limits", json={"target": {"tenant": "globex", "department": "rnd"},
                                     "limits": {"rpm": 1, "budget": "2.50",
                                                "budget_period": "weekly"}})
    assert put.status_code == 200, put.text
    assert put.json()["limits"] == {"rpm": 1, "budget_micros": 2_500_000,
                                    "budget_period": "weekly", "budget": "2.50",
                                    "currency": "USD"}
    shown = admin.get("/limits", params={"tenant": "globex"}).json()["data"]
    assert [e["scope"] for e in shown] == ["department:globex/rnd"]

    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)

    budget = admin.get("/tenants/globex/budget").json()["scopes"]
    rpm = next(lim for lim in budget[0]["limits"] if lim["name"] == "rpm")
    assert (rpm["spent"], rpm["remaining"], rpm["limit"]) == (1, 0, 1)
    weekly = next(lim for lim in budget[0]["limits"] if lim["name"] == "budget")
    assert weekly["unit"] == "cost_micros" and weekly["spent"] > 0
    assert (weekly["currency"], weekly["limit_amount"]) == ("USD", "2.50")  # not micros
    spent = weekly["spent"]
    assert weekly["spent_amount"] == f"0.{spent:06d}"  # a few micros
    assert weekly["resets_at"] is not None

    bad = admin.put("/limits", json={"target": {"tenant": "globex"},
                                     "limits": {"rpm": -1}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_limit"
    gone = admin.delete("/limits", params={"tenant": "globex", "department": "rnd"})
    assert gone.status_code == 200
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)

    assert admin.delete(f"/keys/{key_id}").status_code == 200
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    assert admin.delete("/tenants/globex/apps/bot", params={"department": "rnd"}
                        ).status_code == 200
    assert admin.delete("/tenants/globex/departments/rnd").status_code == 200
    assert admin.delete("/tenants/globex").status_code == 200
    assert admin.get("/tenants/globex/apps").status_code == 404
    client.close()
    admin.close()


def test_tenant_isolation(gw: GatewayThread) -> None:
    admin = _admin(gw)
    for tenant, rpm in (("initech", 50), ("umbrella", 70)):
        assert admin.post("/tenants", json={"name": tenant}).status_code == 201
        put = admin.put("/limits", json={"target": {"tenant": tenant}, "limits": {"rpm": rpm}})
        assert put.status_code == 200, put.text
    own = httpx.Client(base_url=admin.base_url, timeout=30, headers={
        "authorization": f"Bearer {gw.create_key('initech', app='a')}"})
    mine = own.get("/tenants/initech/budget")
    assert mine.status_code == 200
    assert [lim["limit"] for s in mine.json()["scopes"] for lim in s["limits"]] == [50]
    theirs = own.get("/tenants/umbrella/budget")
    assert theirs.status_code == 403 and "70" not in theirs.text
    for method, path in (("GET", "/tenants"), ("GET", "/limits"),
                         ("POST", "/tenants/initech/keys"), ("DELETE", "/tenants/initech"),
                         ("PUT", "/limits")):
        resp = own.request(method, path, json={})
        assert resp.status_code == 403, (method, path)
        assert resp.json()["error"]["code"] == "admin_required"
    anon = httpx.Client(base_url=admin.base_url, timeout=30)
    assert anon.get("/tenants/initech/budget").status_code == 401
    for c in (admin, own, anon):
        c.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tokenplane", "limits", *args,
                           "--home", str(home)], capture_output=True, text=True, env=env,
                          timeout=120)


def test_cli_limits_set_show_delete_reach_a_running_gateway(gw: GatewayThread) -> None:
    key = gw.create_key("hooli", department="eng", app="search")
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    out = _cli(gw.home, "set", "--tenant", "hooli", "--department", "eng", "--app", "search",
               "--rpm", "0", "--tokens-per-day", "1000000", "--budget", "10",
               "--period", "daily", "--max-concurrent", "4")
    assert out.returncode == 0, out.stderr
    assert "app:hooli/eng/search" in out.stdout and "rpm=0" in out.stdout
    shown = _cli(gw.home, "show", "--tenant", "hooli")
    assert shown.returncode == 0 and "search" in shown.stdout and "max_concurrent=4" in \
        shown.stdout
    assert "budget=10.00 " in out.stdout  # currency units, not micros
    with pytest.raises(openai.BadRequestError) as info:  # picked up by the gateway
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    assert info.value.code == "request_exceeds_limit"  # rpm 0: it can never pass
    bad = _cli(gw.home, "set", "--tenant", "hooli", "--budget", "1", "--period", "yearly")
    assert bad.returncode == 2 and "period" in bad.stderr
    deleted = _cli(gw.home, "delete", "--tenant", "hooli", "--department", "eng",
                   "--app", "search")
    assert deleted.returncode == 0, deleted.stderr
    client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    assert _cli(gw.home, "delete", "--tenant", "hooli").returncode == 1
    client.close()
