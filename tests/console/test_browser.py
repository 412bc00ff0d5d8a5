"""The console in a real browser: Debian's Chromium driven by Playwright (pointed at
the system browser; it cannot download its own). Sign in, every page, filters and
drill-down, numbers against the admin API, the CSV export, languages, sign out, and a
tenant's key kept to its tenant."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.console.conftest import Console
from tokenplane.console.routes import PAGES


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium)
        yield b
        b.close()


def sign_in(browser: Browser, console: Console, key: str, locale: str = "en-US") -> Page:
    page = browser.new_context(locale=locale, accept_downloads=True).new_page()
    page.goto(console.base + "/console")
    assert page.url.endswith("/console/login")
    page.fill("#key", key)
    page.click("#sign-in")
    page.wait_for_url("**/console/overview")
    return page


def number(text: str) -> int:
    return int(text.replace(",", "").strip())


def table(page: Page, selector: str) -> list[dict[str, str]]:
    """Rows of a table as {data-col: text}."""
    rows: list[dict[str, str]] = page.eval_on_selector_all(
        f"{selector} tbody tr",
        """rows => rows.map(r => Object.fromEntries(Array.from(r.querySelectorAll('td'))
             .map(td => [td.dataset.col, td.innerText.trim()])))""")
    return rows


def test_admin_walks_every_page(browser: Browser, console: Console) -> None:
    page = sign_in(browser, console, console.admin)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    for name, _, _ in PAGES:
        page.click(f"#nav-{name}")
        page.wait_for_url(f"**/console/{name}")
        assert page.locator("h1").first.is_visible()
        assert page.locator("#error-message").count() == 0, name
        for canvas in page.locator("canvas.chart").all():  # Chart.js drew each chart
            assert canvas.get_attribute("data-drawn") == "1", name
    assert not errors
    page.click("#nav-overview")
    assert page.locator("canvas.chart").count() >= 2  # live tokens/s, latency per model
    today = console.admin_api("/admin/v1/usage", by="tenant", since=_day_start())
    assert number(page.inner_text("#requests-today")) == sum(r["requests"] for r in today["data"])
    assert page.locator("#latency tbody tr").count() == 1  # one model
    # the pages over another feature's admin route: its content, or (a gateway without
    # the route) a plain "not offered here"
    for name, content in (("sessions", "#sessions-table"), ("advice", "#findings-count")):
        page.click(f"#nav-{name}")
        assert page.locator(f"#not-available, {content}").count() == 1, name
    page.click("#nav-cluster")  # the two simulated replicas of the pool
    assert page.locator("tr[data-replica]").count() == 2
    page.click("#nav-audit")
    page.click("#verify-chain")
    page.wait_for_url("**/console/audit/verify")
    statuses = [r["status"] for r in table(page, "#chain-table")]
    assert statuses == ["intact"]
    page.close()


def _day_start() -> str:
    import time

    return str(int(time.time()) // 86400 * 86400)


def test_usage_drill_down_matches_the_admin_api_and_exports_what_is_shown(
        browser: Browser, console: Console) -> None:
    page = sign_in(browser, console, console.admin)
    page.goto(console.base + "/console/usage?since=7d")
    by_tenant = {r["name"]: r for r in table(page, "#usage-table")}
    api = console.admin_api("/admin/v1/usage", by="tenant", since="7d")["data"]
    assert set(by_tenant) == {r["tenant"] for r in api} >= {"acme", "globex"}
    for r in api:
        shown = by_tenant[r["tenant"]]
        assert number(shown["requests"]) == r["requests"]
        assert number(shown["input_system"]) == r["input_system"]
        assert number(shown["output_tokens"]) == r["output_tokens"]
        assert shown["cost"] == r["cost"]
    # tenant -> department -> app -> key, then by model
    page.click("#usage-table a:text-is('acme')")
    page.wait_for_url("**tenant=acme**")
    depts = {r["name"]: r for r in table(page, "#usage-table")}
    api_d = console.admin_api("/admin/v1/usage", by="department", tenant="acme", since="7d")
    assert {r["department"] or "-" for r in api_d["data"]} == set(depts)
    for r in api_d["data"]:
        assert number(depts[r["department"] or "-"]["requests"]) == r["requests"]
    page.click("#usage-table a:text-is('research')")
    page.wait_for_url("**department=research**")
    apps = table(page, "#usage-table")
    assert [a["name"] for a in apps] == ["chat"] and number(apps[0]["requests"]) == 6
    page.click("#usage-table a:text-is('chat')")
    page.wait_for_url("**app=chat**")
    keys = table(page, "#usage-table")
    api_k = [r for r in console.admin_api("/admin/v1/usage", by="app,key", tenant="acme",
                                          since="7d")["data"] if r["app"] == "chat"]
    assert {k["name"] for k in keys} == {r["key"] for r in api_k}
    assert sum(number(k["requests"]) for k in keys) == 6
    page.select_option("#by", "model")
    page.click("#apply")
    page.wait_for_url("**by=model**")
    models = table(page, "#usage-table")
    assert [m["name"] for m in models] == ["sim-llama3-8b"]
    # by hour: the same sums (everything happened within the last day)
    page.select_option("#grain", "hour")
    page.fill("#since", "24h")
    page.click("#apply")
    page.wait_for_url("**grain=hour**")
    hourly = table(page, "#usage-table")
    assert number(hourly[0]["requests"]) == 6
    # the CSV export is the table as shown
    with page.expect_download() as dl:
        page.click("#export-csv")
    text = dl.value.path().read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    shown = table(page, "#usage-table")
    assert len(rows) == len(shown) == 1
    for got, want in zip(rows, shown, strict=True):
        assert got["model"] == want["name"]
        for col, value in want.items():
            if col != "name":
                assert got[col] == value.replace(",", ""), col
    page.close()


def test_pages_in_chinese_by_switch_and_by_browser(browser: Browser, console: Console) -> None:
    page = sign_in(browser, console, console.admin)
    page.click("#lang-zh-CN")
    page.wait_for_url("**/console/overview")
    assert page.inner_text("h1") == "概览"
    assert page.inner_text("#nav-usage") == "用量"
    page.click("#lang-en")
    assert page.inner_text("h1") == "Overview"
    page.close()
    zh = sign_in(browser, console, console.admin, locale="zh-CN")
    assert zh.inner_text("h1") == "概览"
    zh.close()


# drawn in the page's own font: each string's pixels (a canvas, so what the browser
# really rendered); a glyph no installed font has is the same box (tofu) whatever the
# character, so Han characters that render differ from one another and from boxes
GLYPHS = """() => document.fonts.ready.then(() => {
  const font = getComputedStyle(document.querySelector('h1')).font;
  const c = document.createElement('canvas'); c.width = 240; c.height = 60;
  const g = c.getContext('2d');
  const draw = (s) => { g.clearRect(0, 0, 240, 60); g.font = font; g.fillStyle = '#000';
                        g.fillText(s, 4, 44); return g.getImageData(0, 0, 240, 60).data.join(); };
  const blank = draw('');
  return {font: font, han1: draw('概'), han2: draw('览'), tofu: draw('\\u{10FFFD}'),
          blank: blank, family: getComputedStyle(document.body).fontFamily};
})"""


def test_chinese_glyphs_render_not_tofu(browser: Browser, console: Console,
                                        cjk_font: str) -> None:
    """Issue 31: the Chinese console declares a CJK font stack, and with the font
    package the README names installed (scripts/test installs it) its characters
    render as glyphs, not as the boxes of a missing font."""
    page = sign_in(browser, console, console.admin, locale="zh-CN")
    assert page.inner_text("h1") == "概览"
    got = page.evaluate(GLYPHS)
    assert "WenQuanYi Micro Hei" in got["family"] and "Noto Sans CJK SC" in got["family"]
    assert got["family"].lstrip('"').startswith("PingFang SC")  # CJK faces first in zh
    assert got["han1"] != got["blank"] and got["han2"] != got["blank"]  # drawn at all
    assert got["han1"] != got["han2"], "the Chinese characters render as identical boxes"
    assert got["han1"] != got["tofu"], "the Chinese characters render as tofu"
    page.close()


def test_sign_out(browser: Browser, console: Console) -> None:
    page = sign_in(browser, console, console.admin)
    cookies: list[Any] = page.context.cookies()
    [session] = [c for c in cookies if c["name"] == "tp_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert page.evaluate("document.cookie").find("tp_console") < 0  # scripts cannot read it
    page.click("#logout")
    page.wait_for_url("**/console/login")
    page.goto(console.base + "/console/usage")
    assert page.url.endswith("/console/login")
    page.close()


def test_a_tenant_key_cannot_reach_another_tenant(browser: Browser, console: Console) -> None:
    page = sign_in(browser, console, console.acme)
    assert page.locator("#nav-cluster").count() == 0
    assert page.inner_text("#who") == "acme"
    page.click("#nav-usage")
    names = {r["name"] for r in table(page, "#usage-table")}
    assert names == {"research", "-"}  # acme's departments, no tenant column
    api = console.admin_api("/admin/v1/usage", key=console.acme, by="department", since="7d")
    assert sum(number(r["requests"]) for r in table(page, "#usage-table")) == \
        sum(r["requests"] for r in api["data"])
    for url in ("/console/usage?tenant=globex", "/console/cluster",
                "/console/audit?tenant=globex", "/console/usage.csv?tenant=globex"):
        resp = page.goto(console.base + url)
        assert resp is not None and resp.status == 403, url
        assert "globex" not in page.inner_text("main")
    page.goto(console.base + "/console/audit")
    records = table(page, "#audit-table")
    assert len(records) == 9 and {r["tenant"] for r in records} == {"acme"}
    page.fill("#audit-app", "search")  # search by app within the scope
    page.click("#search")
    page.wait_for_url("**app=search**")
    assert len(table(page, "#audit-table")) == 3
    page.close()
