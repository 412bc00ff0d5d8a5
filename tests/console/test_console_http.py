"""The console over real HTTP (no browser): sessions, CSRF, scope, languages, off."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from importlib import resources
from pathlib import Path

import httpx
import orjson
import pytest

from tests.console.conftest import Console
from tests.gateway.harness import GatewayThread, sim_config

TOKEN = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = TOKEN.search(html)
    assert found is not None, html[:500]
    return found.group(1)


@contextmanager
def signed_in(console: Console, key: str, **headers: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console.base, timeout=30, headers=headers) as h:
        form = h.get("/console/login")
        r = h.post("/console/login", data={"key": key, "csrf": csrf_of(form.text)},
                   headers={"origin": console.base})
        assert r.status_code == 303 and r.headers["location"] == "/console/overview", r.text
        yield h


def test_sign_in_sets_a_strict_http_only_cookie_and_sign_out_ends_it(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30) as h:
        assert h.get("/console/overview").headers["location"] == "/console/login"
        form = h.get("/console/login")
        r = h.post("/console/login", data={"key": console.admin, "csrf": csrf_of(form.text)},
                   headers={"origin": console.base})
        cookie = r.headers["set-cookie"]
        assert cookie.startswith("tp_console=")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/console" in cookie
        assert "Secure" not in cookie  # plain HTTP, no proxy saying https
        assert console.admin not in cookie  # the key is encrypted in it
        page = h.get("/console/overview")
        assert page.status_code == 200 and 'id="who">admin<' in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        out = h.post("/console/logout", data={"csrf": csrf_of(page.text)},
                     headers={"origin": console.base})
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert 'tp_console=""' in out.headers["set-cookie"]
        assert h.get("/console/overview").headers["location"] == "/console/login"


def test_cookie_is_secure_behind_an_https_proxy(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30) as h:
        form = h.get("/console/login", headers={"x-forwarded-proto": "https"})
        assert "Secure" in form.headers["set-cookie"]


def test_a_post_without_the_csrf_token_or_from_elsewhere_is_refused(console: Console) -> None:
    with signed_in(console, console.admin) as h:
        page = h.get("/console/overview")
        token = csrf_of(page.text)
        for data, origin in (({}, console.base), ({"csrf": "forged"}, console.base),
                             ({"csrf": token}, "http://evil.example"), ({"csrf": token}, "")):
            headers = {"origin": origin} if origin else {}
            r = h.post("/console/logout", data=data, headers=headers)
            assert r.status_code == 403, (data, origin)
            assert "CSRF" in r.text
        r = h.post("/console/audit/verify", data={}, headers={"origin": console.base})
        assert r.status_code == 403
        assert h.get("/console/overview").status_code == 200  # still signed in
        # a Referer from this host stands in for a missing Origin
        r = h.post("/console/logout", data={"csrf": token},
                   headers={"referer": console.base + "/console/overview"})
        assert r.status_code == 303
    with httpx.Client(base_url=console.base, timeout=30) as h:  # sign-in too
        form = h.get("/console/login")
        r = h.post("/console/login", data={"key": console.admin, "csrf": "x"},
                   headers={"origin": console.base})
        assert r.status_code == 403
        r = h.post("/console/login", data={"key": console.admin, "csrf": csrf_of(form.text)},
                   headers={"origin": "http://evil.example"})
        assert r.status_code == 403


def test_a_bad_key_or_a_forged_cookie_does_not_sign_in(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30) as h:
        form = h.get("/console/login")
        r = h.post("/console/login", data={"key": "tp-not-a-key", "csrf": csrf_of(form.text)},
                   headers={"origin": console.base})
        assert r.status_code == 401 and 'id="login-error"' in r.text
        h.cookies.set("tp_console", "gAAAAAforged", path="/console")
        assert h.get("/console/usage").headers["location"] == "/console/login"


def test_revoking_the_key_ends_the_session(console: Console) -> None:
    key = console.gw.create_key("globex", app="bot")
    with signed_in(console, key) as h:
        assert h.get("/console/usage").status_code == 200
        key_id = next(r.id for r in console.gw.gateway.keys.list_keys("globex")
                      if r.revoked_at is None and r.prefix == key[:10])
        r = httpx.delete(f"{console.base}/admin/v1/keys/{key_id}", timeout=30,
                         headers={"authorization": f"Bearer {console.admin}"})
        assert r.status_code == 200
        assert h.get("/console/usage").headers["location"] == "/console/login"


def test_a_tenant_key_sees_its_tenant_only(console: Console) -> None:
    with signed_in(console, console.acme) as h:
        for path in ("/console/usage?tenant=globex", "/console/usage.csv?tenant=globex",
                     "/console/overview?tenant=globex", "/console/budgets?tenant=globex",
                     "/console/versions?tenant=globex", "/console/audit?tenant=globex",
                     "/console/slos?tenant=globex", "/console/sessions?tenant=globex",
                     "/console/cluster"):
            r = h.get(path)
            assert r.status_code == 403, path
            assert "globex" not in r.text.split("<main>")[-1]
        for path in ("/console/overview", "/console/usage", "/console/usage.csv",
                     "/console/budgets", "/console/versions", "/console/audit",
                     "/console/usage?department=~&app=search"):
            r = h.get(path)
            assert r.status_code == 200, path
            assert "globex" not in r.text and "default" not in r.text.split("<main>")[-1], path
        nav = h.get("/console/overview").text
        assert 'id="nav-cluster"' not in nav


def test_usage_matches_the_admin_api_and_the_csv_is_the_table(console: Console) -> None:
    api = console.admin_api("/admin/v1/usage", by="tenant", since="7d")
    with signed_in(console, console.admin) as h:
        page = h.get("/console/usage", params={"since": "7d"}).text
        csv_text = h.get("/console/usage.csv", params={"since": "7d"}).text
    lines = csv_text.strip().split("\n")
    assert lines[0].startswith("tenant,requests,limited,client_errors,failures,cancelled,")
    by_name = {line.split(",")[0]: line.split(",") for line in lines[1:]}
    header = lines[0].split(",")
    assert set(by_name) == {r["tenant"] for r in api["data"]}
    for row in api["data"]:
        got = dict(zip(header, by_name[row["tenant"]], strict=True))
        assert int(got["requests"]) == row["requests"]
        assert int(got["output_tokens"]) == row["output_tokens"]
        assert got["cost"] == row["cost"]
        # cached tokens at the input price less the cached-input one (0.10 - 0.05 per 1M)
        saved = int(Decimal("0.05") * row["cached_input_tokens"])
        assert got["cache_savings"] == str(Decimal(saved).scaleb(-6))
        assert f'<td data-col="cost" class="num">{row["cost"]}</td>' in page


def test_language_follows_the_browser_and_the_switch(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30) as h:
        assert "登录" in h.get("/console/login", headers={"accept-language": "zh-CN,zh;q=0.9"}).text
        en = h.get("/console/login", headers={"accept-language": "fr, en;q=0.5"}).text
        assert "Sign in" in en and "登录" not in en.split("<main>")[-1]
        r = h.get("/console/lang", params={"to": "zh-CN"})
        assert r.headers["location"] == "/console/overview"  # no next: the overview
        assert "tp_lang=zh-CN" in r.headers["set-cookie"]
        r = h.get("/console/lang", params={"to": "en", "next": "/console/usage?days=7"})
        assert r.headers["location"] == "/console/usage?days=7"
        h.get("/console/lang", params={"to": "zh-CN"})
        assert "登录" in h.get("/console/login", headers={"accept-language": "en"}).text


def test_a_next_that_is_not_a_console_path_is_a_400(console: Console) -> None:
    # never off the console, and a CR/LF never reaches the Location header (it used
    # to end in a 502 and a traceback, without signing in)
    bad = ("https://evil.example/", "//evil.example/console", "/\\evil.example",
           "/console/usage\r\nSet-Cookie: x=1", "/console\n", "/consolex", "/admin/v1/keys",
           "javascript:alert(1)")
    with httpx.Client(base_url=console.base, timeout=30) as h:
        for target in bad:
            r = h.get("/console/lang", params={"to": "en", "next": target})
            assert r.status_code == 400, (target, r.status_code, r.text[:200])
            assert "not a page of this console" in r.text
            assert "set-cookie" not in r.headers and "location" not in r.headers
        raw = h.get("/console/lang?to=en&next=/console/usage%0d%0aX-Evil:%201")
        assert raw.status_code == 400 and "x-evil" not in raw.headers


def test_catalogs_translate_every_string_the_templates_show() -> None:
    base = resources.files("tokenplane.console")
    en = orjson.loads((base / "messages" / "en.json").read_bytes())
    zh = orjson.loads((base / "messages" / "zh-CN.json").read_bytes())
    assert set(en) == set(zh)
    assert all(zh[k].strip() for k in zh)
    used: set[str] = set()
    for tpl in Path(str(base / "templates")).glob("*.html"):
        used |= set(re.findall(r"""(?<![A-Za-z_])t\(["']([a-zA-Z0-9_.\-/]+)["']\s*[,)]""",
                               tpl.read_text()))
    # the keys templates build from values: every value the pages can produce
    from tokenplane.admission.amounts import UNITS
    from tokenplane.console.i18n import LANGUAGES
    from tokenplane.console.pages.audit import VERDICTS
    from tokenplane.console.pages.usage import CLIENT_COLUMNS, COLUMNS
    from tokenplane.console.queries import SOURCES
    from tokenplane.console.routes import PAGES
    from tokenplane.metering.client_reports import API_LABELS

    groups = ("tenant", "department", "app", "key_id", "model")
    used |= {f"nav.{name}" for name, _, _ in PAGES} | {f"lang.{lang}" for lang in LANGUAGES}
    used |= {f"col.{c}" for c in (*COLUMNS, *groups)} | {f"usage.by.{g}" for g in groups}
    used |= {f"col.{c}" for c in CLIENT_COLUMNS} | {f"api.{op}" for op in API_LABELS}
    used |= {f"source.{s}" for s in (*SOURCES, "output")} | {f"verdict.{v}" for v in VERDICTS}
    from tokenplane.console.pages.audit import SHOWN_OUTCOMES

    used |= {f"outcome.{o}" for o in SHOWN_OUTCOMES}
    used |= {f"unit.{u}" for u in UNITS} | {f"breaker.{b}" for b in ("closed", "open",
                                                                      "half_open")}
    used |= {f"top.{d}" for d in ("tenant", "tenant/department", "tenant/app", "department",
                                  "app", "model")}
    assert len(used) > 150 and used <= set(en), sorted(used - set(en))


def test_the_console_can_be_turned_off(tmp_path: Path) -> None:
    cfg = sim_config(profile="instant")
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    cfg["console"] = {"enabled": False}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        r = httpx.get(f"http://127.0.0.1:{gw.port}/console/login", timeout=30)
        assert r.status_code == 404 and r.json()["error"]["code"]
        assert not (tmp_path / "console.secret").exists()
    finally:
        gw.stop()


@pytest.mark.parametrize("name", ["chart.umd.min.js", "console.js", "console.css",
                                  "chart.js.LICENSE.md"])
def test_static_files_are_served_from_the_package(console: Console, name: str) -> None:
    r = httpx.get(f"{console.base}/console/static/{name}", timeout=30)
    assert r.status_code == 200 and len(r.content) > 100
    assert httpx.get(f"{console.base}/console/static/..%2Fsession.py",
                     timeout=30).status_code == 404


def test_budgets_show_use_against_each_limit_and_a_forecast(console: Console) -> None:
    auth = {"authorization": f"Bearer {console.admin}"}
    r = httpx.put(f"{console.base}/admin/v1/limits", headers=auth, timeout=30, json={
        "target": {"tenant": "acme"}, "limits": {"tokens_per_day": 1_000_000, "rpm": 500}})
    assert r.status_code == 200, r.text
    from tests.console.conftest import _traffic

    _traffic(console.gw, console.acme_search, 2)  # spends against the new limits
    status = console.admin_api("/admin/v1/tenants/acme/budget", key=console.acme)
    [scope] = status["scopes"]
    with signed_in(console, console.acme) as h:
        page = h.get("/console/budgets").text
    for lim in scope["limits"]:
        used = lim["spent"] + lim["reserved"]
        assert f'<tr data-limit="{lim["name"]}">' in page
        assert f'<td class="num" data-col="used">{used:,}</td>' in page
    assert int(next(x for x in scope["limits"] if x["name"] == "tokens_per_day")["spent"]) > 0
    forecast = re.search(r'<tr data-limit="tokens_per_day">.*?data-col="forecast">([^<]+)<',
                         page, re.S)
    assert forecast is not None and forecast.group(1).strip() != "-"  # a calendar limit
    rpm = re.search(r'<tr data-limit="rpm">.*?data-col="forecast">([^<]+)<', page, re.S)
    assert rpm is not None and rpm.group(1).strip() == "-"  # a window: no forecast


def test_slos_show_what_the_admin_api_says_for_the_scope(console: Console) -> None:
    for key, names in ((console.admin, {"all-available", "acme-fast"}),
                       (console.acme, {"acme-fast"}), (console.globex, set())):
        before = console.admin_api("/admin/v1/slos", key=key)
        with signed_in(console, key) as h:
            page = h.get("/console/slos").text
        after = console.admin_api("/admin/v1/slos", key=key)
        assert {s["name"] for s in after["data"]} == names
        assert set(re.findall(r'data-slo="([^"]+)"', page)) == names
        if before != after:  # an evaluation round ran in between: names only
            continue
        for slo in after["data"]:
            for sli in slo["slis"]:
                if sli.get("valid") is not None:
                    cell = f'{sli["bad"]:,} / {sli["valid"]:,}'
                    assert f'data-col="events">{cell}</td>' in page, (slo["name"], cell)


def test_versions_count_the_attempts_the_usage_api_counts(console: Console) -> None:
    """The Versions page (version_rollups) and the usage API (usage_rollups) agree on
    the requests each model served: every attempt here reached an upstream."""
    usage = console.admin_api("/admin/v1/usage", by="model", since="7d")["data"]
    with signed_in(console, console.admin) as h:
        page = h.get("/console/versions").text
    shown = [int(n.replace(",", "")) for n in
             re.findall(r'data-col="requests">([0-9,]+)</td>', page)]
    assert shown and sum(shown) == sum(r["requests"] - r["refused"] for r in usage)
    with signed_in(console, console.globex) as h:  # a tenant's own versions only
        page = h.get("/console/versions").text
    globex = console.admin_api("/admin/v1/usage", by="model", since="7d",
                               key=console.globex)["data"]
    shown = [int(n.replace(",", "")) for n in
             re.findall(r'data-col="requests">([0-9,]+)</td>', page)]
    assert sum(shown) == sum(r["requests"] for r in globex) == 5


def test_advice_shows_the_kept_documents_findings_and_its_age(console: Console) -> None:
    doc = console.admin_api("/admin/v1/advice", since="30d")  # the kept default document
    with signed_in(console, console.admin) as h:
        page = h.get("/console/advice")
        assert page.status_code == 200
        count = re.search(r'id="findings-count">(\d+)<', page.text)
        assert count is not None and int(count.group(1)) == doc["total"]["findings"]
        age = re.search(r'id="advice-age" data-age="([0-9.]+)"', page.text)
        assert age is not None and float(age.group(1)) >= 0
        # a young ledger: the page says what it checked and what it lacks
        cov = doc["coverage"]
        checked = re.search(r'id="coverage-checked">Checked ([0-9,]+) requests in (\d+) groups',
                            page.text)
        assert checked is not None and int(checked.group(1).replace(",", "")) == \
            cov["requests"]
        assert "at least 20 requests" in page.text
        if cov["short"] is not None:
            assert 'id="coverage-short">Lacking data:' in page.text
        for bad in ("0", "x", "-1"):
            assert h.get(f"/console/advice?page={bad}").status_code == 400, bad
