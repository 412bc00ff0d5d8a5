"""Usage reports through the admin API (tenant isolation) and the ``tokenplane usage`` CLI,
against a ledger filled by real traffic through the gateway."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from typer.testing import CliRunner

from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.ledger_checks import read_ledger
from tokenplane.cli.main import build_cli

MODEL = "sim-llama3-8b"
SYSTEM = "You are the support assistant of a large retailer. Answer politely. " * 10


class Ledgered:
    def __init__(self, gw: GatewayThread, keys: dict[str, str]) -> None:
        self.gw, self.keys = gw, keys

    def get(self, path: str, key: str | None, **params: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        url = self.gw.base_url.removesuffix("/v1") + path
        return httpx.get(url, params=params, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def ledgered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledgered]:
    home = Path(tmp_path_factory.mktemp("usage"))
    first = GatewayThread(sim_config(), home).start()
    keys = {
        "acme_chat": first.create_key("acme", department="eng", app="chat"),
        "acme_rag": first.create_key("acme", department="eng", app="rag"),
        "globex": first.create_key("globex", department="sales", app="crm"),
        "admin": first.create_key("default", admin=True),
    }

    async def traffic() -> None:
        async def send(key: str, n: int, system: str | None) -> None:
            client = AsyncOpenAI(base_url=first.base_url, api_key=key, max_retries=0)
            for i in range(n):
                msgs = [{"role": "user", "content": f"question number {i}"}]
                if system:
                    msgs.insert(0, {"role": "system", "content": system})
                await client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8)
            await client.close()

        await asyncio.gather(send(keys["acme_chat"], 6, SYSTEM), send(keys["acme_rag"], 3, None),
                             send(keys["globex"], 5, "Globex secret sales prompt."))

    asyncio.run(traffic())
    first.stop()  # drains the journal into the ledger
    second = GatewayThread(sim_config(), home).start()
    yield Ledgered(second, keys)
    second.stop()


def _data(resp: httpx.Response) -> list[dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    rows: list[dict[str, Any]] = resp.json()["data"]
    return rows


def test_tenant_key_sees_only_its_tenant(ledgered: Ledgered) -> None:
    key = ledgered.keys["acme_chat"]
    for path, params in [("/admin/v1/usage", {"by": "tenant,app,key,model,day"}),
                         ("/admin/v1/usage/sources", {}),
                         ("/admin/v1/usage/prompts", {"min_requests": 1}),
                         ("/admin/v1/usage/top", {"by": "app", "order": "tokens"}),
                         ("/admin/v1/usage/top", {"by": "tenant"}),
                         ("/admin/v1/usage/clients", {"by": "tenant,app"})]:
        resp = ledgered.get(path, key, **params)
        assert resp.status_code == 200, resp.text
        assert "globex" not in resp.text.lower() and "crm" not in resp.text, path
        assert _data(resp), path
    rows = _data(ledgered.get("/admin/v1/usage", key, by="tenant,app"))
    assert {(r["tenant"], r["app"]) for r in rows} == {("acme", "chat"), ("acme", "rag")}
    assert {r["requests"] for r in rows} == {6, 3}


def test_tenant_key_cannot_name_another_tenant(ledgered: Ledgered) -> None:
    resp = ledgered.get("/admin/v1/usage", ledgered.keys["acme_rag"], tenant="globex")
    assert resp.status_code == 403
    err = resp.json()["error"]
    assert err["code"] == "permission_denied" and err["param"] == "tenant"
    assert "globex" not in err["message"]
    own = ledgered.get("/admin/v1/usage", ledgered.keys["acme_rag"], tenant="acme")
    assert {r["tenant"] for r in _data(own)} == {"acme"}


@pytest.mark.parametrize("key", [None, "tp-not-a-key"])
def test_unauthenticated_is_refused(ledgered: Ledgered, key: str | None) -> None:
    resp = ledgered.get("/admin/v1/usage", key)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] in ("missing_api_key", "invalid_api_key")


def test_bad_parameters_are_400(ledgered: Ledgered) -> None:
    admin = ledgered.keys["admin"]
    for params in [{"by": "colour"}, {"since": "yesterday-ish"}, {"format": "xml"}]:
        resp = ledgered.get("/admin/v1/usage", admin, **params)
        assert resp.status_code == 400, params
        assert resp.json()["error"]["param"] == next(iter(params))


def test_admin_sees_all_tenants_and_numbers_match_the_ledger(ledgered: Ledgered) -> None:
    admin = ledgered.keys["admin"]
    rows = _data(ledgered.get("/admin/v1/usage", admin, by="tenant", since="1d"))
    by_tenant = {r["tenant"]: r for r in rows}
    assert set(by_tenant) == {"acme", "globex"}
    events, _ = read_ledger(str(ledgered.gw.home / "ledger.db"))
    for tenant, row in by_tenant.items():
        mine = [e for e in events if e["tenant"] == tenant]
        assert row["requests"] == len(mine)
        assert row["input_tokens"] == sum(e["input_tokens"] for e in mine)
        assert row["output_tokens"] == sum(e["output_tokens"] for e in mine)
        assert row["cost_micros"] == sum(e["cost_micros"] for e in mine) > 0
    only = _data(ledgered.get("/admin/v1/usage", admin, by="app", tenant="globex"))
    assert [r["app"] for r in only] == ["crm"]
    text = ledgered.get("/admin/v1/usage", admin, by="tenant", format="csv")
    assert text.headers["content-type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(text.text)))
    assert {r["tenant"] for r in parsed} == {"acme", "globex"}


def test_prompts_report_counts_cacheable_tokens(ledgered: Ledgered) -> None:
    rows = _data(ledgered.get("/admin/v1/usage/prompts", ledgered.keys["admin"]))
    acme = [r for r in rows if r["tenant"] == "acme"]
    assert len(acme) == 1 and acme[0]["requests"] == 6 and acme[0]["app"] == "chat"
    per = acme[0]["tokens_per_request"]
    assert per > 100 and acme[0]["cacheable_tokens"] == 5 * per


def _cli(home: Path, *args: str) -> str:
    result = CliRunner().invoke(build_cli(), ["usage", *args, "--home", str(home)])
    assert result.exit_code == 0, result.output
    return result.output


def test_usage_cli_matches_the_api(ledgered: Ledgered, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENPLANE_DATABASE_URL", raising=False)
    home = ledgered.gw.home
    cli_rows = json.loads(_cli(home, "--by", "tenant", "--by", "app", "--format", "json"))
    api_rows = _data(ledgered.get("/admin/v1/usage", ledgered.keys["admin"], by="tenant,app"))
    assert cli_rows == api_rows
    table = _cli(home, "sources", "--tenant", "acme")
    assert "system_share" in table and "rag" in table and "crm" not in table
    prompts = list(csv.DictReader(io.StringIO(_cli(home, "prompts", "--format", "csv"))))
    assert {r["tenant"] for r in prompts} == {"acme", "globex"}
    top = json.loads(_cli(home, "top", "--by", "app", "--order", "tokens", "--format", "json",
                          "--limit", "1"))
    assert len(top) == 1 and top[0]["app"] == "chat"
    bad = CliRunner().invoke(build_cli(), ["usage", "--by", "colour", "--home", str(home)])
    assert bad.exit_code == 2
    missing = CliRunner().invoke(build_cli(), ["usage", "--home", str(home / "nowhere")])
    assert missing.exit_code == 1 and not (home / "nowhere" / "ledger.db").exists()


def test_clients_by_api_and_client_from_the_api_and_the_cli(
        ledgered: Ledgered, monkeypatch: pytest.MonkeyPatch) -> None:
    """The openai SDK's chat traffic is OpenAI Chat from openai-python; the CLI shows
    what the API answers; a tenant's key sees its tenant's apps only."""
    monkeypatch.delenv("TOKENPLANE_DATABASE_URL", raising=False)
    admin = ledgered.keys["admin"]
    rows = _data(ledgered.get("/admin/v1/usage/clients", admin, since="1d"))
    assert [(r["api"], r["operation"], r["client"], r["requests"], r["request_share"])
            for r in rows] == [("OpenAI Chat", "chat", "openai-python", 14, 1.0)]
    events, _ = read_ledger(str(ledgered.gw.home / "ledger.db"))
    assert rows[0]["input_tokens"] == sum(e["input_tokens"] for e in events)
    assert rows[0]["output_tokens"] == sum(e["output_tokens"] for e in events)
    assert rows[0]["cost_micros"] == sum(e["cost_micros"] for e in events)
    mine = _data(ledgered.get("/admin/v1/usage/clients", ledgered.keys["acme_rag"], by="app"))
    assert [(r["app"], r["requests"]) for r in mine] == [("chat", 6), ("rag", 3)]
    assert ledgered.get("/admin/v1/usage/clients", admin, by="model").status_code == 400
    cli = json.loads(_cli(ledgered.gw.home, "clients", "--since", "1d", "--format", "json"))
    assert cli == rows
    table = _cli(ledgered.gw.home, "clients", "--by", "tenant", "--tenant", "globex")
    assert "OpenAI Chat" in table and "openai-python" in table and "acme" not in table
    bad = CliRunner().invoke(build_cli(), ["usage", "clients", "--by", "model",
                                           "--home", str(ledgered.gw.home)])
    assert bad.exit_code == 2


def test_cli_finds_the_data_serve_uses_or_says_where_it_looked(
        ledgered: Ledgered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from another directory, the CLI does not create an empty ./.tokenplane: it
    reads the data --config names (as serve does) or refuses, naming where it looked."""
    monkeypatch.delenv("TOKENPLANE_DATABASE_URL", raising=False)
    monkeypatch.delenv("TOKENPLANE_HOME", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for args in (["keys", "list"], ["usage", "sources"], ["limits", "show"],
                 ["keys", "create", "--tenant", "acme"]):
        r = CliRunner().invoke(build_cli(), args)
        assert r.exit_code == 1, (args, r.output)
        assert "no tokenplane data at" in r.output and str(elsewhere) in r.output, r.output
        assert "--config" in r.output
    assert list(elsewhere.iterdir()) == []  # nothing conjured
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"data_dir: {ledgered.gw.home}\nmodels: [{{alias: a, backends: "
                   "[{type: sim}]}]\n")
    r = CliRunner().invoke(build_cli(), ["keys", "list", "--config", str(cfg)])
    assert r.exit_code == 0 and "acme" in r.output, r.output
    r = CliRunner().invoke(build_cli(), ["usage", "sources", "--config", str(cfg),
                                         "--format", "json"])
    assert r.exit_code == 0, r.output
    assert {row["tenant"] for row in json.loads(r.output)} == {"acme", "globex"}
    monkeypatch.setenv("TOKENPLANE_HOME", str(ledgered.gw.home))
    assert CliRunner().invoke(build_cli(), ["keys", "list"]).exit_code == 0
