"""Fuzzing the admin routes of a running gateway from its ``/openapi.json`` (issue 13):
every operation the document lists, with path and query parameters and bodies drawn
from it (valid, with one field of a wrong type, or junk), with an admin key, a tenant
key, a wrong key or none. No answer is a 5xx, every answer has ``x-request-id``, every
error is in OpenAI's envelope, a wrong type is refused naming its field, and the
gateway still serves afterwards.

Only the tenant ``fuzzco`` and names the fuzzer makes up are ever changed or deleted
(the keys it sends with belong to ``default`` and ``ops``)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.check import answer_ok, messages_error_ok
from tests.fuzz.conftest import FUZZ_TENANT, Fuzzed
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.schemas import field_paths, minimal, valid, wrongs

PREFIX = "/admin/v1"
_KEEP = {"default", "ops"}  # the tenants of the keys the fuzzer sends with
_NAME = st.one_of(st.just(FUZZ_TENANT), st.just(FUZZ_TENANT), st.just("nosuch"),
                  st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                          max_size=12)).filter(lambda n: n not in _KEEP)
_WHO = st.sampled_from(["admin", "admin", "admin", "tenant", "wrong", "none"])


def _operations(fuzzed: Fuzzed) -> list[tuple[str, str]]:
    return sorted((path, method) for path, ops in fuzzed.doc["paths"].items()
                  if path.startswith(PREFIX) for method in ops)


def _headers(fuzzed: Fuzzed, who: str) -> dict[str, str]:
    if who in fuzzed.keys:
        return fuzzed.auth(who)
    return {"authorization": "Bearer sk-not-a-key"} if who == "wrong" else {}


def _safe(body: Any) -> Any:
    """Keeps limits and deletions off the tenants the fuzzer's keys belong to."""
    if isinstance(body, dict) and isinstance(body.get("target"), dict) \
            and body["target"].get("tenant") in _KEEP:
        body = {**body, "target": {**body["target"], "tenant": FUZZ_TENANT}}
    return body


def _query(params: list[dict[str, Any]], data: st.DataObject) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in params:
        if p["in"] != "query" or not data.draw(st.booleans(), p["name"] + "?"):
            continue
        value = data.draw(valid(p["schema"]) | wrongs(p["schema"]) | _NAME, p["name"])
        out[p["name"]] = value if isinstance(value, str) else json.dumps(value)
    if out.get("tenant") in _KEEP:
        out["tenant"] = FUZZ_TENANT
    return out


def test_the_document_lists_the_admin_api(fuzzed: Fuzzed) -> None:
    ops = _operations(fuzzed)
    assert (f"{PREFIX}/limits", "put") in ops and (f"{PREFIX}/tenants", "post") in ops
    assert (f"{PREFIX}/usage", "get") in ops and (f"{PREFIX}/audit", "get") in ops
    assert len(ops) >= 20


def test_admin_routes(fuzzed: Fuzzed) -> None:
    ops = _operations(fuzzed)

    @fuzz_settings(3.0)
    @given(data=st.data(), op=st.sampled_from(ops), who=_WHO)
    def run(data: st.DataObject, op: tuple[str, str], who: str) -> None:
        fuzzed.gw.gateway.keys.ensure_scope(FUZZ_TENANT, None, None)  # it may be deleted
        path, method = op
        spec = fuzzed.doc["paths"][path][method]
        params = spec.get("parameters", [])
        url = path
        for p in params:
            if p["in"] == "path":
                value = quote(data.draw(_NAME, p["name"]), safe="")
                url = url.replace("{" + p["name"] + "}", value)
        kw: dict[str, Any] = {"params": _query(params, data)}
        if "requestBody" in spec:
            schema = spec["requestBody"]["content"]["application/json"]["schema"]
            kind = data.draw(st.sampled_from(["valid", "wrong", "junk"]), "kind")
            if kind == "junk":
                kw["content"] = data.draw(st.binary(max_size=32), "junk")
            else:
                body = data.draw(valid(schema), "body")
                if isinstance(body.get("target"), dict) and data.draw(st.booleans(), "ours"):
                    body["target"]["tenant"] = FUZZ_TENANT
                if kind == "wrong":
                    name = data.draw(st.sampled_from(sorted(schema["properties"])), "field")
                    body[name] = data.draw(wrongs(schema["properties"][name]), "value")
                kw["json"] = _safe(body)
        resp = fuzzed.client.request(method.upper(), url, headers=_headers(fuzzed, who), **kw)
        answer_ok(resp, (who, method, url, kw))

    run()
    fuzzed.still_serves()


def _body_ops(fuzzed: Fuzzed) -> list[tuple[str, str]]:
    return [(p, m) for p, m in _operations(fuzzed)
            if "requestBody" in fuzzed.doc["paths"][p][m]]


def test_every_admin_body_field_in_the_document_is_validated(fuzzed: Fuzzed) -> None:
    ops = _body_ops(fuzzed)
    assert len(ops) == 5
    fuzzed.gw.create_key(FUZZ_TENANT)  # (again: the fuzzer may have deleted it)
    for path, method in ops:
        schema = fuzzed.doc["paths"][path][method]["requestBody"]["content"][
            "application/json"]["schema"]
        url = path.replace("{tenant}", FUZZ_TENANT)
        base = _safe(minimal(schema))
        probes = list(field_paths(schema, base))
        assert {p for p, _, _ in probes} >= set(schema["properties"]), path
        for param, body, _ in probes:
            resp = fuzzed.client.request(method.upper(), url, json=body,
                                         headers=fuzzed.auth("admin"))
            err = answer_ok(resp, (path, body))
            assert resp.status_code == 400 and err is not None, (path, body, resp.text)
            assert (err["param"], err["code"]) == (param, "invalid_type"), (path, body, err)
    fuzzed.still_serves()


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded"])
def test_admin_bodies_that_are_not_json_are_415(fuzzed: Fuzzed, ctype: str) -> None:
    fuzzed.gw.create_key(FUZZ_TENANT)
    for path, method in _body_ops(fuzzed):
        url = path.replace("{tenant}", FUZZ_TENANT)
        resp = fuzzed.client.request(method.upper(), url, content=b"name=x",
                                     headers={**fuzzed.auth("admin"), "content-type": ctype})
        err = answer_ok(resp, (path, ctype))
        assert resp.status_code == 415 and err is not None, (path, resp.text)
        assert err["code"] == "unsupported_media_type"


def test_the_document_and_the_routes_agree(fuzzed: Fuzzed) -> None:
    """Every route the gateway serves is in the document, and every operation the
    document lists is served (no 404 for the route, no 405)."""
    app = fuzzed.gw.app
    assert app is not None
    served = {(r.resource.canonical, r.method.lower()) for r in app.router.routes()
              if r.resource is not None and r.method != "HEAD"}
    documented = {(p, m) for p, ops in fuzzed.doc["paths"].items() for m in ops}
    assert {op for op in served if op[0].startswith(("/v1/", PREFIX))} == documented
    fuzzed.gw.gateway.keys.ensure_scope(FUZZ_TENANT, None, None)
    for path, method in sorted(documented):
        url = path.replace("{tenant}", FUZZ_TENANT)
        for name in ("department", "app", "key_id", "session_id", "model"):
            url = url.replace("{" + name + "}", "nosuch")
        resp = fuzzed.client.request(method.upper(), url, headers=fuzzed.auth("admin"))
        if path.startswith("/v1/messages"):  # Anthropic's envelope, which has no code
            assert messages_error_ok(resp, (method, url)) is not None, (method, url)
            assert resp.status_code not in (404, 405), (method, url, resp.text)
            continue
        err = answer_ok(resp, (method, url))
        assert err is None or err["code"] not in ("unknown_route", "method_not_allowed"), \
            (method, url, err)


def test_the_document_is_served_by_both_servers(fuzzed: Fuzzed) -> None:
    assert fuzzed.gw.server is not None
    assert fuzzed.doc["openapi"].startswith("3.1")
    inner = fuzzed.gw.call(fuzzed.gw.server.listen_inner())  # the aiohttp app directly
    direct = fuzzed.client.get(f"http://127.0.0.1:{inner}/openapi.json")
    assert direct.status_code == 200 and direct.json() == fuzzed.doc
