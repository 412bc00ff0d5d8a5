"""``tokenplane report cost`` (issue 17): a ledger of two months written through the
real sink; the report's numbers equal ``tokenplane usage``'s for the same month, in
HTML and in a PDF opened with pypdf (text and page count); the forecast, the drivers
and the prefix-cache saving; bad input."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from pypdf import PdfReader
from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink
from tokenplane.reports.cost import forecast, money
from tokenplane.reports.month import Month

NOV = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
OCT = datetime(2026, 10, 1, tzinfo=UTC).timestamp()
DAY = 86400.0

# (tenant, department, app, model, month start, day, requests, cost micros each,
#  cached input tokens each); each app's API and client in CLIENTS
TRAFFIC = [
    ("acme", "sales", "crm-bot", "chat", OCT, 3, 10, 20_000, 0),
    ("acme", "sales", "crm-bot", "chat", NOV, 4, 30, 20_000, 400),
    ("acme", "people", "hr-bot", "chat", OCT, 5, 20, 10_000, 0),
    ("acme", "people", "hr-bot", "chat", NOV, 9, 5, 10_000, 0),
    ("globex", "ops", "runbook", "chat", NOV, 12, 7, 30_000, 1000),
]


CLIENTS = {"crm-bot": ("messages", "claude-cli"), "hr-bot": ("chat", "openai-python"),
           "runbook": ("chat", None)}


def _events() -> list[UsageEvent]:
    out = []
    for n, (tenant, dept, app, model, start, day, reqs, cost, cached) in enumerate(TRAFFIC):
        for i in range(reqs):
            ts = start + day * DAY + 60 * i
            out.append(UsageEvent(
                request_id=f"r{n}-{i}", attempt=0, ts=ts, tenant=tenant, department=dept,
                app=app, model=model, input_tokens=1000, cached_input_tokens=cached,
                output_tokens=100, input_system=600, input_user=400, cost_micros=cost,
                estimated_input_tokens=1000, upstream_start_ts=ts - 1, arrival_ts=ts - 1,
                operation=CLIENTS[app][0], client=CLIENTS[app][1]))
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ledger")

    async def write() -> None:
        sink = await open_sink(home / "ledger.db")
        try:
            await sink.write(_events())
        finally:
            await sink.close()

    asyncio.run(write())
    cfg = {"models": [{"alias": "chat", "prices": {"input": "0.20", "cached_input": "0.05",
                                                   "output": "0.80"},
                       "backends": [{"type": "sim", "profile": "instant"}]}],
           "data_dir": str(home)}
    (home / "gateway.yaml").write_text(yaml.safe_dump(cfg))
    return home


def _usage(home: Path, *args: str) -> list[dict[str, object]]:
    r = CliRunner().invoke(build_cli(), ["usage", "--by", "department", "--by", "app",
                                         "--since", "2026-11-01", "--until", "2026-12-01",
                                         "--home", str(home), "--format", "json", *args])
    assert r.exit_code == 0, r.output
    rows: list[dict[str, object]] = json.loads(r.output)
    return rows


def _report(home: Path, out: Path, fmt: str, *args: str) -> None:
    r = CliRunner().invoke(build_cli(), [
        "report", "cost", "--month", "2026-11", "--format", fmt, "--out", str(out),
        "--home", str(home), "--config", str(home / "gateway.yaml"), *args])
    assert r.exit_code == 0, r.output


def _text_numbers(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_html_report_carries_the_usage_commands_numbers(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "cost.html"
    _report(home, out, "html")
    html = out.read_text()
    rows = _usage(home)
    assert len(rows) == 3
    for row in rows:
        cells = re.search(rf"<td>{row['department']}</td><td>{row['app']}</td>"
                          r"((?:<td class=\"n\">[^<]*</td>)+)", html)
        assert cells is not None, row
        values = re.findall(r'<td class="n">([^<]*)</td>', cells.group(1))
        assert values[0] == f"{row['requests']:,}"
        assert values[1] == f"{row['input_tokens']:,}"
        assert values[2] == f"{row['output_tokens']:,}"
        assert values[8] == money(int(str(row["cost_micros"])))
    total = sum(int(str(r["cost_micros"])) for r in rows)
    assert f"<td>cost this month</td><td class=\"n\">{money(total)}</td>" in html
    # October: crm-bot 10 x 0.02 = 0.20, hr-bot 20 x 0.01 = 0.20
    assert "<td>cost 2026-10</td><td class=\"n\">0.40</td>" in html
    assert "<td>month total</td>" in html  # November is over: the actual total


def test_drivers_and_the_prefix_cache_saving(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "cost.html"
    _report(home, out, "html")
    html = out.read_text()
    # change: crm-bot +0.40 (0.60 - 0.20), runbook +0.21, hr-bot -0.15 (0.05 - 0.20)
    drivers = html[html.index("Top drivers"):html.index("Savings realised")]
    order = [m for m in re.findall(r"<td>(crm-bot|runbook|hr-bot)</td>", drivers)]
    assert order == ["crm-bot", "runbook", "hr-bot"]
    # cached: 30 x 400 + 7 x 1000 = 19,000 tokens at (0.20 - 0.05) per 1M = 0.00285
    saving = html[html.index("Savings realised"):]
    assert "<td>prefix caching</td><td class=\"n\">19,000</td>" in saving
    assert str(money(int(Decimal(19_000) * Decimal("0.15")))) in saving


def test_by_api_and_client(home: Path, tmp_path: Path) -> None:
    """November by API and client, the most tokens first: what ``tokenplane usage
    clients`` counts for the month."""
    out = tmp_path / "cost.html"
    _report(home, out, "html")
    html = out.read_text()
    part = html[html.index("By API and client"):html.index("Top drivers")]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>((?:<td class=\"n\">[^<]*</td>)+)",
                      part)
    got = [(api, client, re.findall(r'<td class="n">([^<]*)</td>', cells))
           for api, client, cells in rows]
    # 1,100 tokens a request: crm-bot 30, runbook 7, hr-bot 5 (46,200 in all)
    assert got == [
        ("Anthropic Messages", "claude-cli", ["30", "30,000", "3,000", "71.4%", "0.60"]),
        ("OpenAI Chat", "-", ["7", "7,000", "700", "16.7%", "0.21"]),
        ("OpenAI Chat", "openai-python", ["5", "5,000", "500", "11.9%", "0.05"]),
    ]
    r = CliRunner().invoke(build_cli(), ["usage", "clients", "--since", "2026-11-01",
                                         "--until", "2026-12-01", "--home", str(home),
                                         "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [(c["api"], c["client"], c["requests"]) for c in json.loads(r.output)] == [
        (api, None if client == "-" else client, int(cells[0])) for api, client, cells in got]


def test_one_tenant_and_the_pdf(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "cost.pdf"
    _report(home, out, "pdf", "--tenant", "acme")
    reader = PdfReader(str(out))
    assert 1 <= len(reader.pages) <= 5
    text = _text_numbers(" ".join(p.extract_text() for p in reader.pages))
    assert "Cost report 2026-11" in text and "tenant acme" in text
    rows = _usage(home, "--tenant", "acme")
    assert {r["app"] for r in rows} == {"crm-bot", "hr-bot"}
    for row in rows:
        assert str(row["app"]) in text
        assert money(int(str(row["cost_micros"]))) in text
    assert "runbook" not in text and "globex" not in text
    assert "By API and client" in text and "Anthropic Messages claude-cli 30" in text


def test_forecast_of_a_month_in_progress() -> None:
    dec = Month(2026, 12)
    start = dec.start
    daily = [(f"2026-12-{d:02d}", 1_000_000 * d) for d in range(1, 11)]
    # ten complete days; the last seven average (4+...+10)/7 = 7 units a day
    f = forecast(dec, daily, start + 10 * DAY)
    assert f.basis == "run-rate"
    assert f.daily_rate_micros == 7_000_000
    assert f.month_end_micros == 55_000_000 + 21 * 7_000_000
    done = forecast(dec, daily, dec.end + 1)
    assert (done.basis, done.month_end_micros) == ("actual", 55_000_000)


@pytest.mark.parametrize("args, hint", [
    (["--month", "2026-13"], "--month"),
    (["--month", "November"], "--month"),
    (["--month", "2026-11", "--format", "docx"], "--format"),
])
def test_bad_input(home: Path, tmp_path: Path, args: list[str], hint: str) -> None:
    r = CliRunner().invoke(build_cli(), ["report", "cost", "--out", str(tmp_path / "x"),
                                         "--home", str(home), *args])
    assert r.exit_code == 2
    assert hint in r.output


SMALL = datetime(2026, 9, 1, tzinfo=UTC).timestamp()  # September 2026: tiny spends
AUG = datetime(2026, 8, 1, tzinfo=UTC).timestamp()


def test_the_pdf_shows_small_amounts_no_change_tenants_and_a_full_first_page(
    tmp_path: Path,
) -> None:
    """Issue 31: amounts below a cent keep their significant digits (never 0.00); a
    month that spent what the one before did says "no change", with no shares of it;
    the table names each line's tenant; the first page carries the chart and the
    table, not white space."""
    events = []
    for n, (tenant, start, cost) in enumerate([("acme", SMALL, 12), ("initech", SMALL, 30),
                                               ("acme", AUG, 30), ("initech", AUG, 12)]):
        for i in range(3):
            ts = start + (4 + i) * DAY
            events.append(UsageEvent(
                request_id=f"s{n}-{i}", attempt=0, ts=ts, tenant=tenant, department="lab",
                app="notes", model="chat", input_tokens=100, output_tokens=10,
                input_user=100, cost_micros=cost, estimated_input_tokens=100,
                upstream_start_ts=ts - 1, arrival_ts=ts - 1))

    async def write() -> None:
        sink = await open_sink(tmp_path / "ledger.db")
        try:
            await sink.write(events)
        finally:
            await sink.close()

    asyncio.run(write())
    out = tmp_path / "cost.pdf"
    r = CliRunner().invoke(build_cli(), [
        "report", "cost", "--month", "2026-09", "--format", "pdf", "--out", str(out),
        "--home", str(tmp_path)])
    assert r.exit_code == 0, r.output
    reader = PdfReader(str(out))
    pages = [_text_numbers(p.extract_text()) for p in reader.pages]
    text = " ".join(pages)
    # 3 x 12 = 36 micro-units for acme, 3 x 30 = 90 for initech: 0.000126 in all
    assert "cost this month 0.000126" in text
    assert "cost 2026-08 0.000126" in text
    assert "change no change" in text
    assert "acme lab notes 3" in text and "initech lab notes 3" in text
    assert "0.000036" in text and "0.000090" in text
    assert "+0.000054" in text and "-0.000054" in text  # the drivers, signed
    assert "No change in the total" in text
    assert "share of the total change" not in text or "%" not in text.split(
        "share of the total change", 1)[1].split("Savings", 1)[0]
    assert "Cost per day" in pages[0] and "By tenant, department and app" in pages[0]


def test_money_keeps_the_digits_that_show_it() -> None:
    assert [money(m) for m in (0, 1, 12, 2850, 9_994, 10_000, 1_234_567, -36, 123_456_789)] \
        == ["0.00", "0.000001", "0.000012", "0.00285", "0.00999", "0.01", "1.23", "-0.000036",
            "123.46"]
    assert money(54, signed=True) == "+0.000054" and money(-54, signed=True) == "-0.000054"
