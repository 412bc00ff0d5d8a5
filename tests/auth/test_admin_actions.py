"""Admin actions in the tamper-evident audit log: every change through the admin API
(allowed or refused) is a ``kind: admin`` record -- who, with which role, what, on
which tenant, the status -- searchable with ``/admin/v1/audit?kind=admin`` within
the caller's scope, and the chain still verifies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.governance.audit.keyfile import read_key_file
from tokenplane.governance.audit.service import audit_root
from tokenplane.governance.audit.verify import verify


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["tenants"] = [{"name": "acme"}, {"name": "globex"}]
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("actions"))).start()
    yield g
    g.stop()


def _client(gw: GatewayThread, key: str) -> httpx.Client:
    return httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1",
                        headers={"authorization": f"Bearer {key}"}, timeout=30)


def _actions(http: httpx.Client, **query: str) -> list[dict[str, Any]]:
    resp = http.get("/audit", params={"kind": "admin", "since": "1h", **query})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"])


def test_admin_actions_are_audited(gw: GatewayThread) -> None:
    gw.gateway.keys.ensure_scope("globex", None, None)
    op_key = gw.create_key("_operator", admin=True)
    boss_key = gw.create_key("acme", role="tenant-admin")
    viewer_key = gw.create_key("acme", role="viewer")
    with _client(gw, op_key) as op, _client(gw, boss_key) as boss, \
            _client(gw, viewer_key) as viewer, \
            _client(gw, gw.create_key("acme", role="auditor")) as auditor, \
            _client(gw, gw.create_key("_operator", role="auditor")) as chief:
        assert op.put("/limits", json={"target": {"tenant": "globex"},
                                       "limits": {"rpm": 7}}).status_code == 200
        made = boss.post("/tenants/acme/keys", json={"name": "bot", "role": "inference"})
        assert made.status_code == 201
        assert viewer.put("/limits", json={"target": {"tenant": "acme"},
                                           "limits": {"rpm": 1}}).status_code == 403
        assert boss.get("/limits").status_code == 200  # a read: not an action

        everything = _actions(op)
        assert [(a["action"], a["tenant"], a["role"], a["status"], a["verdict"])
                for a in everything] == [
            ("PUT /admin/v1/limits", "acme", "viewer", 403, "block"),
            ("POST /admin/v1/tenants/{tenant}/keys", "acme", "tenant-admin", 201, "allow"),
            ("PUT /admin/v1/limits", "globex", "operator", 200, "allow"),
        ]
        limits = everything[2]
        assert limits["params"]["body"] == {"target": {"tenant": "globex"},
                                            "limits": {"rpm": 7}}
        key_made = everything[1]
        assert made.json()["key"] not in str(key_made)  # the key itself is never logged
        assert key_made["params"]["body"] == {"name": "bot", "role": "inference"}

        # scopes: acme's auditor sees acme's actions only; the operator's auditor all
        assert [a["tenant"] for a in _actions(auditor)] == ["acme", "acme"]
        assert len(_actions(chief)) == 3
        assert viewer.get("/audit", params={"kind": "admin"}).status_code == 403
        assert auditor.get("/audit", params={"kind": "nope"}).status_code == 400
        requests_only = op.get("/audit", params={"since": "1h"}).json()["data"]
        assert all(r["kind"] == "request" for r in requests_only)

    gw.call(gw.gateway.governance.audit.flush())  # type: ignore[union-attr]
    key = read_key_file(gw.home)
    assert key is not None
    for log_dir in audit_root(gw.home).iterdir():
        result = verify(log_dir, key)
        assert result.ok, result.reason
