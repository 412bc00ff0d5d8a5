"""Feedback through a real gateway (the official openai client's request ids), the
finish reason in the ledger, and the advisor over that traffic: ``GET /admin/v1/advice``
(tenant scope) and ``tokenplane advise`` give the same findings."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from typer.testing import CliRunner

from tests.fuzz.schemas import field_paths
from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.advice.gateway.reader import AdviceReader
from tokenplane.api.admin_advice import AdminAdviceRoutes
from tokenplane.cli.main import build_cli

BIG, SMALL = "sim-big", "sim-small"
MESSAGES = [{"role": "system", "content": "You triage support tickets. " * 20},
            {"role": "user", "content": "My parcel never arrived."}]


def _config() -> dict[str, Any]:
    cfg = sim_config(replicas=1, alias=BIG,
                     prices={"input": "2.50", "cached_input": "1.25", "output": "10.00"})
    small = dict(cfg["models"][0], alias=SMALL,
                 prices={"input": "0.15", "cached_input": "0.075", "output": "0.60"},
                 backends=[dict(cfg["models"][0]["backends"][0], id="sim-small")])
    cfg["models"].append(small)
    cfg["tenants"].append({"name": "globex"})
    cfg["observe"] = {"metrics": {"listen": None}}
    return cfg


class Traffic:
    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.keys = {
            "triage": gw.create_key("acme", department="ops", app="triage"),
            "acme_other": gw.create_key("acme", department="ops", app="mail"),
            "globex": gw.create_key("globex", app="crm"),
            "admin": gw.create_key("default", admin=True),
        }
        self.ids: dict[str, list[str]] = {BIG: [], SMALL: [], "stream": [], "globex": []}
        self.stream_finish: str | None = None  # what the streaming client saw

    @property
    def root(self) -> str:
        return self.gw.base_url.removesuffix("/v1")

    def post(self, body: Any, key: str | None, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.post(self.root + "/v1/feedback", json=body, headers=headers,
                          timeout=30, **kw)

    def get(self, key: str | None, *, fresh: bool = False, **params: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.keys[key]}"} if key else {}
        if fresh:  # a document computed after this request (not one kept from before)
            headers["cache-control"] = "no-cache"
        return httpx.get(self.root + "/admin/v1/advice", params=params, headers=headers,
                         timeout=30)

    def ledger(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return self.gw.call(self.gw.gateway.meter.sink.fetch(sql, list(params)))


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    gw = GatewayThread(_config(), Path(tmp_path_factory.mktemp("advice"))).start()
    t = Traffic(gw)

    async def send() -> None:
        triage = AsyncOpenAI(base_url=gw.base_url, api_key=t.keys["triage"], max_retries=0)
        globex = AsyncOpenAI(base_url=gw.base_url, api_key=t.keys["globex"], max_retries=0)
        for model in (BIG, SMALL):
            for _ in range(22):
                resp = await triage.chat.completions.create(
                    model=model, messages=MESSAGES, max_tokens=8)  # type: ignore[arg-type]
                assert resp.choices[0].finish_reason == "length"
                assert resp._request_id is not None
                t.ids[model].append(resp._request_id)
        stream = await triage.chat.completions.with_raw_response.create(
            model=SMALL, messages=MESSAGES, max_tokens=20, stream=True)  # type: ignore[arg-type]
        async for chunk in stream.parse():  # type: ignore[attr-defined]
            for choice in chunk.choices:
                t.stream_finish = choice.finish_reason or t.stream_finish
        t.ids["stream"].append(stream.headers["x-request-id"])
        resp = await globex.chat.completions.create(
            model=SMALL, messages=MESSAGES, max_tokens=4)  # type: ignore[arg-type]
        assert resp._request_id is not None
        t.ids["globex"].append(resp._request_id)
        await triage.close()
        await globex.close()

    asyncio.run(send())
    for model in (BIG, SMALL):
        for rid in t.ids[model][:21]:
            resp = t.post({"request_id": rid, "score": 0.8, "labels": ["resolved"]}, "triage")
            assert resp.status_code == 200, resp.text
    yield t
    gw.stop()


def test_the_finish_reason_is_in_the_ledger(traffic: Traffic) -> None:
    rows = traffic.ledger("SELECT request_id, stream, finish_reason FROM usage_events")
    reasons = {r["request_id"]: (bool(r["stream"]), r["finish_reason"]) for r in rows}
    assert all(reasons[rid] == (False, "length") for rid in traffic.ids[BIG])
    (stream_id,) = traffic.ids["stream"]
    assert traffic.stream_finish is not None  # read from the stream's SSE events
    assert reasons[stream_id] == (True, traffic.stream_finish)


def test_feedback_is_stored_once_per_request(traffic: Traffic) -> None:
    rid = traffic.ids[BIG][0]
    resp = traffic.post({"request_id": rid, "score": 0.25, "comment": "wrong team"},
                        "acme_other")  # another key of the same tenant may score it
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["object"] == "feedback" and body["model"] == BIG and body["app"] == "triage"
    rows = traffic.ledger("SELECT tenant, app, model, score, comment, labels FROM feedback "
                          "WHERE request_id = ?", rid)
    assert rows == [{"tenant": "acme", "app": "triage", "model": BIG, "score": 0.25,
                     "comment": "wrong team", "labels": "[]"}]
    back = traffic.post({"request_id": rid, "score": 0.8, "labels": ["resolved"]}, "triage")
    assert back.status_code == 200
    counts = traffic.ledger("SELECT model, COUNT(*) AS n FROM feedback GROUP BY model "
                            "ORDER BY model")
    assert counts == [{"model": BIG, "n": 21}, {"model": SMALL, "n": 21}]


def test_feedback_on_another_tenants_request_is_not_found(traffic: Traffic) -> None:
    (rid,) = traffic.ids["globex"]
    resp = traffic.post({"request_id": rid, "score": 1}, "triage")
    assert resp.status_code == 404
    err = resp.json()["error"]
    assert (err["code"], err["param"]) == ("request_not_found", "request_id")
    assert "globex" not in err["message"]
    assert traffic.post({"request_id": rid, "score": 1}, "globex").status_code == 200
    assert traffic.post({"request_id": rid, "score": 0}, "admin").status_code == 200


def test_feedback_on_an_unknown_request_is_404(traffic: Traffic) -> None:
    resp = traffic.post({"request_id": "req_nosuch", "score": 1}, "triage")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "request_not_found"


@pytest.mark.parametrize(("body", "param", "code"), [
    ({"score": 1}, "request_id", "missing_required"),
    ({"request_id": "x"}, "score", "missing_required"),
    ({"request_id": "x", "score": 1.5}, "score", "invalid_value"),
    ({"request_id": "x", "score": -0.1}, "score", "invalid_value"),
    ({"request_id": "x", "score": True}, "score", "invalid_type"),
    ({"request_id": "x", "score": "good"}, "score", "invalid_type"),
    ({"request_id": 7, "score": 1}, "request_id", "invalid_type"),
    ({"request_id": "", "score": 1}, "request_id", "invalid_value"),
    ({"request_id": "x", "score": 1, "labels": "a"}, "labels", "invalid_type"),
    ({"request_id": "x", "score": 1, "labels": ["a"] * 21}, "labels", "invalid_value"),
    ({"request_id": "x", "score": 1, "comment": "c" * 4001}, "comment", "invalid_value"),
    ({"request_id": "x", "score": 1, "rating": 5}, "rating", "unknown_parameter"),
    ([1, 2], None, None),
])
def test_bad_feedback_is_400(traffic: Traffic, body: Any, param: str | None,
                             code: str | None) -> None:
    resp = traffic.post(body, "triage")
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if param is not None:
        assert (err["param"], err["code"]) == (param, code), err


def test_feedback_needs_a_key_and_json(traffic: Traffic) -> None:
    assert traffic.post({"request_id": "x", "score": 1}, None).status_code == 401
    resp = httpx.post(traffic.root + "/v1/feedback", content=b"request_id=x",
                      headers={"authorization": f"Bearer {traffic.keys['triage']}",
                               "content-type": "application/x-www-form-urlencoded"})
    assert resp.status_code == 415
    resp = httpx.post(traffic.root + "/v1/feedback", content=b"{nope",
                      headers={"authorization": f"Bearer {traffic.keys['triage']}"})
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_json"


def _by_kind(doc: dict[str, Any]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    return {(f["kind"], f["tenant"], f["app"], f["model"]): f for f in doc["findings"]}


def test_advice_from_the_traffic(traffic: Traffic) -> None:
    asked = time.time()
    # every tenant's default document was computed when the gateway started (before
    # the traffic): the first view is answered with it (or waits for that computation)
    started = traffic.get("admin").json()
    assert started["generated_at"] < asked and "age_s" in started
    resp = traffic.get("admin", fresh=True)
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert doc["generated_at"] >= asked and doc["refreshing"] is False
    # the default window is the admin's kept document: this one, from memory, aged
    kept = traffic.get("admin").json()
    assert kept["generated_at"] == doc["generated_at"] and kept["age_s"] >= 0
    assert kept["findings"] == doc["findings"]
    assert traffic.get("admin", since="30d").json()["generated_at"] == doc["generated_at"]
    found = _by_kind(doc)
    rs = found[("right_sizing", "acme", "triage", BIG)]
    fig = rs["evidence"]["figures"]
    assert fig["cheaper_model"] == SMALL and fig["feedback"] == 21
    assert fig["mean_score"] == pytest.approx(0.8) and rs["saving"]["cost_micros_per_month"] > 0
    # every answer of the triage app stopped at max_tokens
    verbose = found[("verbose_outputs", "acme", "triage", BIG)]
    assert verbose["evidence"]["figures"]["length_share"] == 1.0
    assert verbose["details"]["suggested_max_tokens"] >= 64


def test_a_tenant_key_sees_its_tenant_only(traffic: Traffic) -> None:
    acme = traffic.get("triage")
    assert acme.status_code == 200
    assert {f["tenant"] for f in acme.json()["findings"]} == {"acme"}
    assert acme.json()["tenant"] == "acme"
    globex = traffic.get("globex")
    assert globex.status_code == 200 and globex.json()["findings"] == []
    refused = traffic.get("triage", tenant="globex")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"


@pytest.mark.parametrize("params", [{"since": "lately"}, {"until": "1e400"},
                                    {"since": "1d", "until": "2d"}])
def test_bad_advice_parameters_are_400(traffic: Traffic, params: dict[str, str]) -> None:
    resp = traffic.get("admin", **params)
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]["param"] in ("since", "until")


def test_advice_is_kept_for_a_minute(traffic: Traffic) -> None:
    since = str(int(time.time()) - 2 * 86400)
    first = traffic.get("admin", since=since).json()
    again = traffic.get("admin", since=since).json()
    assert again["generated_at"] == first["generated_at"]  # from the worker's memory
    other = traffic.get("admin", since="3d").json()  # another window is computed anew
    assert other["generated_at"] > first["generated_at"]


def test_advice_needs_a_key(traffic: Traffic) -> None:
    assert traffic.get(None).status_code == 401


def test_the_cli_gives_the_same_findings(traffic: Traffic) -> None:
    api = traffic.get("admin", tenant="acme").json()
    runner = CliRunner()
    home = str(traffic.gw.home)
    out = runner.invoke(build_cli(), ["advise", "--home", home, "--tenant", "acme",
                                      "--format", "json"], env={"TOKENPLANE_PROGRESS": "plain"})
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert sorted(_by_kind(doc)) == sorted(_by_kind(api))
    for key, f in _by_kind(doc).items():
        assert f["evidence"] == _by_kind(api)[key]["evidence"]
        assert f["title"] == _by_kind(api)[key]["title"]
    assert "reading advice rollups" in out.stderr  # progress on stderr
    table = runner.invoke(build_cli(), ["advise", "--home", home, "--since", "7d"])
    assert table.exit_code == 0, table.output
    assert "[right_sizing] acme/triage on sim-big" in table.stdout
    assert "do: Route app 'triage'" in table.stdout
    bad = runner.invoke(build_cli(), ["advise", "--home", home, "--format", "xml"])
    assert bad.exit_code == 2


def test_every_feedback_field_in_the_document_is_validated(traffic: Traffic) -> None:
    """``GET /openapi.json`` lists ``POST /v1/feedback``; each field it names, set to a
    value of a wrong type, is a 400 naming that field."""
    doc = httpx.get(traffic.root + "/openapi.json", timeout=30).json()
    schema = doc["paths"]["/v1/feedback"]["post"]["requestBody"]["content"][
        "application/json"]["schema"]
    assert schema["required"] == ["request_id", "score"]
    probes = list(field_paths(schema, {"request_id": "x", "score": 1}))
    assert {p for p, _, _ in probes} >= {"request_id", "score", "comment", "labels"}
    for param, body, union in probes:
        resp = traffic.post(body, "triage")
        assert resp.status_code == 400, (param, body, resp.text)
        assert resp.json()["error"]["param"] in (param, union), (body, resp.text)
    assert "/admin/v1/advice" in doc["paths"]


def _advice_routes(traffic: Traffic) -> AdminAdviceRoutes:
    for route in traffic.gw.app.router.routes():
        owner = getattr(route.handler, "__self__", None)
        if isinstance(owner, AdminAdviceRoutes):
            return owner
    raise AssertionError("no advice route")


def test_wait_false_does_not_wait_for_a_document_not_computed_yet(traffic: Traffic) -> None:
    routes = _advice_routes(traffic)
    since = str(int(time.time()) - 5 * 86400 - 7)  # a window nobody asked for yet
    grace, routes.grace_s = routes.grace_s, 0.0  # no grace: the 202 at once
    try:
        first = traffic.get("admin", since=since, wait="false")
    finally:
        routes.grace_s = grace
    assert first.status_code == 202, first.text
    pending = first.json()
    assert pending["object"] == "advice.pending" and pending["computing_s"] >= 0
    done = traffic.get("admin", since=since)  # waits for that same computation
    assert done.status_code == 200 and done.json()["object"] == "advice"
    kept = traffic.get("admin", since=since, wait="false")
    assert kept.status_code == 200 and kept.json()["generated_at"] == done.json()["generated_at"]
    assert traffic.get("admin", wait="soon").json()["error"]["param"] == "wait"


def test_the_advisor_reads_through_a_connection_of_its_own(traffic: Traffic) -> None:
    """A computation never runs on the ledger sink's own thread (which the flusher
    and the console's pages share): its reader is another connection, read-only."""
    async def check() -> None:
        shared = traffic.gw.gateway.meter.sink
        reader = AdviceReader(lambda: shared)
        own = await reader.get()
        try:
            assert own is not shared and await reader.get() is own
            rows = await own.fetch("SELECT COUNT(*) AS n FROM advice_rollups")
            assert rows[0]["n"] > 0
            with pytest.raises(Exception, match="readonly"):
                await own.fetch("DELETE FROM advice_rollups")
        finally:
            await reader.close()

    traffic.gw.call(check())
