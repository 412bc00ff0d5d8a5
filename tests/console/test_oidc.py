"""Console sign-in with OpenID Connect against a real provider (npm's oidc-provider,
run by node): the authorization code flow with PKCE, through the provider's own
login and consent pages, the ID token checked, its claims mapped to tenant, role and
department; each role's pages; refusals for an unknown tenant, a bad role, a replayed
or forged callback; signing out revokes the sign-in's key."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from tests.console.oidc import oidc_provider
from tests.gateway.harness import GatewayThread, free_port, sim_config

SECRET = "tokenplane-test-client-secret"
ACCOUNTS = {
    "alice": {"tokenplane_tenant": "acme", "tokenplane_role": "viewer"},
    "bob": {"tokenplane_tenant": "acme", "tokenplane_role": "tenant-admin",
            "tokenplane_department": "rnd"},
    "root": {"tokenplane_role": "operator"},
    "carol": {"tokenplane_tenant": "acme", "tokenplane_role": "auditor"},
    "mallory": {"tokenplane_tenant": "nosuch", "tokenplane_role": "viewer"},
    "eve": {"tokenplane_tenant": "acme", "tokenplane_role": "superuser"},
}
FORM = re.compile(r'<form[^>]*action="([^"]+)"[^>]*method="post">(.*?)</form>', re.S)
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    mp = pytest.MonkeyPatch()
    mp.setenv("TP_TEST_OIDC_SECRET", SECRET)
    provider_port = free_port()
    cfg = sim_config(replicas=1, profile="instant")
    cfg["tenants"] = [{"name": "acme"}]
    cfg["observe"] = {"metrics": {"listen": None}}
    cfg["console"] = {"oidc": {
        "issuer": f"http://127.0.0.1:{provider_port}", "client_id": "tokenplane-console",
        "client_secret_env": "TP_TEST_OIDC_SECRET", "scopes": ["openid", "tokenplane"],
        "department_claim": "tokenplane_department"}}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("oidc"))).start()
    g.gateway.keys.ensure_scope("acme", "rnd", None)
    redirect = f"http://127.0.0.1:{g.port}/console/oidc/callback"
    try:
        with oidc_provider(provider_port, redirect, ACCOUNTS, SECRET):
            yield g
    finally:
        g.stop()
        mp.undo()


def _sign_in(gw: GatewayThread, h: httpx.Client, login: str) -> httpx.Response:
    """From the console's SSO link through the provider's pages to our callback's
    answer (not followed further)."""
    start = h.get("/console/oidc/login")
    assert start.status_code == 303, start.text
    url = start.headers["location"]
    query = parse_qs(urlsplit(url).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["state"] and query["nonce"] and query["response_type"] == ["code"]
    for _ in range(20):
        resp = h.get(url)
        if urlsplit(url).path == "/console/oidc/callback":
            return resp
        if resp.status_code in (302, 303):
            url = urljoin(url, resp.headers["location"])
            continue
        found = FORM.search(resp.text)
        assert resp.status_code == 200 and found, re.sub(r"<[^>]+>", " ", resp.text)[-800:]
        fields = dict(HIDDEN.findall(found.group(2)))
        if fields.get("prompt") == "login":
            fields.update(login=login, password="anything")
        posted = h.post(urljoin(url, found.group(1)), data=fields)
        assert posted.status_code in (302, 303), posted.text[:500]
        url = urljoin(url, posted.headers["location"])
    raise AssertionError("the sign-in did not come back")


def _client(gw: GatewayThread) -> httpx.Client:
    return httpx.Client(base_url=f"http://127.0.0.1:{gw.port}", timeout=30)


def test_the_login_page_offers_single_sign_on(gw: GatewayThread) -> None:
    with _client(gw) as h:
        assert 'href="/console/oidc/login"' in h.get("/console/login").text


@pytest.mark.parametrize(("login", "role", "landing"), [
    ("alice", "viewer", "/console/overview"), ("carol", "auditor", "/console/audit"),
    ("root", "operator", "/console/overview")])
def test_sign_in_maps_claims_to_a_role(gw: GatewayThread, login: str, role: str,
                                       landing: str) -> None:
    with _client(gw) as h:
        done = _sign_in(gw, h, login)
        assert done.status_code == 200 and f'href="{landing}"' in done.text
        page = h.get(landing)
        assert page.status_code == 200
        (rec,) = [r for r in gw.gateway.keys.list_keys(None) if r.name == f"oidc:{login}"
                  and r.revoked_at is None]
        assert rec.role == role
        ttl = gw.config.console.session_ttl_s
        assert rec.expires_at is not None and abs(rec.expires_at - time.time() - ttl) < 60
        if role == "viewer":
            assert rec.tenant == "acme"
            assert h.get("/console/cluster").status_code == 403
        # signing out revokes the sign-in's key
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        out = h.post("/console/logout", data={"csrf": csrf.group(1)},
                     headers={"origin": f"http://127.0.0.1:{gw.port}"})
        assert out.status_code == 303
        (after,) = [r for r in gw.gateway.keys.list_keys(None) if r.id == rec.id]
        assert after.revoked_at is not None


def test_a_department_claim_binds_the_key(gw: GatewayThread) -> None:
    with _client(gw) as h:
        assert _sign_in(gw, h, "bob").status_code == 200
    (rec,) = [r for r in gw.gateway.keys.list_keys("acme") if r.name == "oidc:bob"]
    assert (rec.role, rec.department) == ("tenant-admin", "rnd")


@pytest.mark.parametrize("login", ["mallory", "eve"])
def test_an_identity_without_access_is_refused(gw: GatewayThread, login: str) -> None:
    with _client(gw) as h:
        done = _sign_in(gw, h, login)
        assert done.status_code == 403 and 'id="login-error"' in done.text
        assert "tp_console" not in done.cookies
    assert not [r for r in gw.gateway.keys.list_keys(None) if r.name == f"oidc:{login}"]


def test_a_replayed_or_forged_callback_is_refused(gw: GatewayThread) -> None:
    with _client(gw) as h:
        done = _sign_in(gw, h, "alice")
        assert done.status_code == 200
        replay = h.get(str(done.request.url))  # the code was exchanged already: 400
        assert replay.status_code == 400
    with _client(gw) as h:
        forged = h.get("/console/oidc/callback", params={"code": "x", "state": "y"})
        assert forged.status_code == 400 and 'id="login-error"' in forged.text
