"""The admin API checks every request field strictly (issue 13, item 7): a wrong JSON
type, an unknown field or a bad name is a 400 naming the field; limits for targets
that do not exist are a 404; creating an existing tenant is a 409. Also the
``tokenplane limits set`` CLI's existence check."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["admission"] = {"limits_reload_s": 0}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("strict"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def admin(gw: GatewayThread) -> Iterator[httpx.Client]:
    key = gw.create_key("ops", admin=True)
    with httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1", timeout=30,
                      headers={"authorization": f"Bearer {key}"}) as c:
        yield c


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    err: dict[str, Any] = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return err


def _key_ids(admin: httpx.Client, tenant: str) -> list[str]:
    return [k["id"] for k in admin.get(f"/tenants/{tenant}/keys").json()["data"]]


@pytest.mark.parametrize("value", ["false", "true", 1, 0, "", [], {}])
def test_admin_flag_must_be_a_json_boolean(gw: GatewayThread, admin: httpx.Client,
                                           value: Any) -> None:
    gw.create_key("strictco")
    before = _key_ids(admin, "strictco")
    err = _error(admin.post("/tenants/strictco/keys", json={"admin": value}), 400)
    assert (err["param"], err["code"], err["type"]) == \
        ("admin", "invalid_type", "invalid_request_error")
    assert _key_ids(admin, "strictco") == before  # no key was minted
    ok = admin.post("/tenants/strictco/keys", json={"admin": False})
    assert ok.status_code == 201 and ok.json()["admin"] is False


def test_other_fields_are_type_checked(gw: GatewayThread, admin: httpx.Client) -> None:
    gw.create_key("typeco")
    for path, body, param in [
        ("/tenants", {"name": 5}, "name"),
        ("/tenants/typeco/departments", {"name": True}, "name"),
        ("/tenants/typeco/apps", {"name": "bot", "department": 3}, "department"),
        ("/tenants/typeco/keys", {"app": ["bot"]}, "app"),
        ("/tenants/typeco/keys", {"name": 1.5}, "name"),
    ]:
        err = _error(admin.post(path, json=body), 400)
        assert (err["param"], err["code"]) == (param, "invalid_type"), (path, body)
    for body, param in [
        ({"target": "typeco", "limits": {"rpm": 1}}, "target"),
        ({"target": {"tenant": "typeco"}, "limits": [1]}, "limits"),
        ({"target": {"tenant": 7}, "limits": {"rpm": 1}}, "target.tenant"),
        ({"target": {"tenant": "typeco", "user": 1}, "limits": {"rpm": 1}}, "target.user"),
        ({"target": {"tenant": "typeco"}, "limits": {"rpm": True}}, "limits.rpm"),
        ({"target": {"tenant": "typeco"}, "limits": {"rpm": "5"}}, "limits.rpm"),
        ({"target": {"tenant": "typeco"}, "limits": {"tpm": 1.5}}, "limits.tpm"),
        ({"target": {"tenant": "typeco"}, "limits": {"budget": False}}, "limits.budget"),
        ({"target": {"tenant": "typeco"}, "limits": {"budget_period": 1}},
         "limits.budget_period"),
    ]:
        err = _error(admin.put("/limits", json=body), 400)
        assert (err["param"], err["code"]) == (param, "invalid_type"), body
    assert admin.get("/limits", params={"tenant": "typeco"}).json()["data"] == []


def test_unknown_fields_are_refused(gw: GatewayThread, admin: httpx.Client) -> None:
    gw.create_key("unkco")
    before = _key_ids(admin, "unkco")
    for method, path, body, param in [
        ("POST", "/tenants", {"name": "unk2", "admn": True}, "admn"),
        ("POST", "/tenants/unkco/keys", {"is_admin": True}, "is_admin"),
        ("PUT", "/limits", {"target": {"tenant": "unkco"}, "limits": {"rpm": 1}, "x": 1}, "x"),
        ("PUT", "/limits", {"target": {"tenant": "unkco", "org": "a"}, "limits": {"rpm": 1}},
         "target.org"),
        ("PUT", "/limits", {"target": {"tenant": "unkco"}, "limits": {"rpmm": 1}},
         "limits.rpmm"),
    ]:
        err = _error(admin.request(method, path, json=body), 400)
        assert (err["param"], err["code"]) == (param, "unknown_parameter"), body
    assert "unk2" not in [t["name"] for t in admin.get("/tenants").json()["data"]]
    assert _key_ids(admin, "unkco") == before


@pytest.mark.parametrize("name", ["bad\x00name", "bad\nname", "tab\tname", "bidi\u202ename",
                                  " lead", "trail ", "x" * 200, "", "a/b"])
def test_names_are_checked(gw: GatewayThread, admin: httpx.Client, name: str) -> None:
    gw.create_key("nameco")
    for path, body in [("/tenants", {"name": name}),
                       ("/tenants/nameco/departments", {"name": name}),
                       ("/tenants/nameco/apps", {"name": name}),
                       *([("/tenants/nameco/keys", {"app": name})] if name else [])]:
        err = _error(admin.post(path, json=body), 400)
        assert err["param"] in ("name", "app"), (path, body)
        assert err["code"] == "invalid_name"
    tenants = [t["name"] for t in admin.get("/tenants").json()["data"]]
    assert name not in tenants
    assert admin.get("/tenants/nameco/departments").json()["data"] == []
    assert admin.get("/tenants/nameco/apps").json()["data"] == []


def test_name_limit_is_128(admin: httpx.Client) -> None:
    assert admin.post("/tenants", json={"name": "t" * 128}).status_code == 201
    assert _error(admin.post("/tenants", json={"name": "t" * 129}), 400)["param"] == "name"


def test_limits_for_missing_targets_are_404(gw: GatewayThread, admin: httpx.Client) -> None:
    _, rec = gw.gateway.keys.create_key("realco", department="eng", app="bot")
    _, dead = gw.gateway.keys.create_key("realco")
    gw.gateway.keys.revoke(dead.id)
    _, other = gw.gateway.keys.create_key("otherco")
    for target, param in [
        ({"tenant": "nosuchco"}, "target.tenant"),
        ({"tenant": "realco", "department": "nope"}, "target.department"),
        ({"tenant": "realco", "department": "eng", "app": "nope"}, "target.app"),
        ({"tenant": "realco", "app": "bot"}, "target.app"),  # bot is under eng
        ({"tenant": "realco", "key_id": "key_000000000000"}, "target.key_id"),
        ({"tenant": "realco", "key_id": dead.id}, "target.key_id"),
        ({"tenant": "realco", "key_id": other.id}, "target.key_id"),  # another tenant's
    ]:
        err = _error(admin.put("/limits", json={"target": target, "limits": {"rpm": 1}}), 404)
        assert (err["param"], err["code"], err["type"]) == \
            (param, "target_not_found", "not_found_error"), target
    assert admin.get("/limits", params={"tenant": "nosuchco"}).json()["data"] == []
    assert admin.get("/limits", params={"tenant": "realco"}).json()["data"] == []
    for target in ({"tenant": "realco"}, {"tenant": "realco", "department": "eng"},
                   {"tenant": "realco", "department": "eng", "app": "bot"},
                   {"tenant": "realco", "key_id": rec.id},
                   {"tenant": "realco", "user": "anyone", "model": "any-model"}):
        put = admin.put("/limits", json={"target": target, "limits": {"rpm": 100}})
        assert put.status_code == 200, (target, put.text)


def test_existing_tenant_is_409(admin: httpx.Client) -> None:
    assert admin.post("/tenants", json={"name": "dupco"}).status_code == 201
    err = _error(admin.post("/tenants", json={"name": "dupco"}), 409)
    assert (err["code"], err["param"], err["type"]) == \
        ("already_exists", "name", "conflict_error")


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenplane", "limits", *args,
                           "--home", str(home)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=120)


def test_cli_limits_set_refuses_missing_targets(gw: GatewayThread) -> None:
    gw.create_key("clico", department="eng")
    missing = _cli(gw.home, "set", "--tenant", "nocli", "--rpm", "5")
    assert missing.returncode == 1 and "No tenant 'nocli'" in missing.stderr
    dept = _cli(gw.home, "set", "--tenant", "clico", "--department", "ops", "--rpm", "5")
    assert dept.returncode == 1 and "No department 'ops'" in dept.stderr
    assert "nocli" not in _cli(gw.home, "show").stdout
    ok = _cli(gw.home, "set", "--tenant", "clico", "--department", "eng", "--rpm", "5")
    assert ok.returncode == 0, ok.stderr
