"""The CLI's tables as a person reads them (issue 31): ``usage`` fits 100 columns by
default (what matters first, the rest named under the table; never ``cost_micros``
beside ``cost``) and shows every column with ``--wide``; instants are ISO times and
spans durations, never epoch floats; JSON keeps the raw values."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.metering.factories import make_event
from tokenplane.cli.main import build_cli
from tokenplane.cli.tables import readable, table
from tokenplane.metering.stores.open import open_sink

T0 = 1_796_661_283.3332872  # 2026-12-07T16:34:43Z


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("tables")
    events = [make_event(i, ts=T0 + i, tenant="acme-research" if i % 2 else "globex",
                         cost_micros=1234 * i, upstream_start_ts=T0 + i - 1,
                         system_fingerprint="fp-1", input_system=10,
                         status="ok" if i % 5 else "error", http_status=200 if i % 5 else 404)
              for i in range(40)]

    async def write() -> None:
        sink = await open_sink(home / "ledger.db")
        try:
            await sink.write(events)
        finally:
            await sink.close()

    asyncio.run(write())
    return home


def _run(home: Path, *args: str) -> str:
    r = CliRunner().invoke(build_cli(), [*args, "--home", str(home)])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_usage_fits_100_columns_and_wide_shows_everything(home: Path) -> None:
    text = _run(home, "usage", "--by", "tenant", "--by", "app")
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 100, text
    head = lines[0].split()
    assert head[:9] == ["tenant", "app", "requests", "cost", "currency", "limited",
                        "client_errors", "failures", "cancelled"]
    assert "cost_micros" not in head  # the amount is there once, as an amount
    note = text.split("(--wide for ", 1)[1]  # the columns left out are named
    assert "cost_micros" not in note and "input_system" in note
    wide = _run(home, "usage", "--by", "tenant", "--by", "app", "--wide")
    whead = wide.splitlines()[0].split()
    assert {"cost_micros", "input_system", "refused_input_tokens"} <= set(whead)
    assert max(len(ln) for ln in wide.splitlines()) > 100
    assert "--wide for" not in wide
    # the client errors are counted as such: every fifth request was a 404
    rows = json.loads(_run(home, "usage", "--by", "tenant", "--format", "json"))
    assert sum(r["client_errors"] for r in rows) == 8
    assert sum(r["failures"] for r in rows) == 0


def test_instants_are_iso_times_not_epoch_floats(home: Path) -> None:
    text = _run(home, "usage", "prompts", "--min-requests", "1")
    assert re.search(r"  2026-12-07T16:3[45]:\d\dZ  ", text), text  # last seen
    assert not re.search(r"\b1796661\d{3}\.\d+", text), text
    assert max(len(ln) for ln in text.splitlines()) <= 100
    raw = json.loads(_run(home, "usage", "prompts", "--min-requests", "1", "--format", "json"))
    assert raw[0]["first_ts"] == pytest.approx(T0)  # programs get the number


def test_readable_rows() -> None:
    row = readable({"slo": "x", "window_s": 2_592_000.0, "threshold_s": 0.5,
                    "created_at": T0, "sli_ratio": 0.90512345678, "n": 3,
                    "tokens_per_s": 12.5})
    assert row == {"slo": "x", "window_s": "30 days", "threshold_s": "500 ms",
                   "created_at": "2026-12-07T16:34:43Z", "sli_ratio": 0.9051, "n": 3,
                   "tokens_per_s": 12.5}  # a rate, not a span
    many = [{f"column_{i}": 123456 for i in range(20)}]
    text = table(many)
    assert max(len(ln) for ln in text.splitlines()) <= 100
    assert "(--wide for" in text and "column_19" in text.split("(--wide for", 1)[1]


def test_durations_and_times_read_as_words() -> None:
    from tokenplane.timefmt import duration, utc_minute

    assert [duration(s) for s in (0, 0.25, 45, 600, 3600, 19_200, 2 * 86400, 2_099_784,
                                  302_400)] == [
        "0 s", "250 ms", "45 s", "10 min", "1 h", "5 h 20 min", "2 days", "24 days",
        "3 days 12 h"]
    assert utc_minute(1_798_761_600) == "2027-01-01 00:00 UTC"


def test_top_models_leave_out_requests_that_named_no_model(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    events = [make_event(i, model="unknown" if i % 2 else "gpt-x", status="error"
                         if i % 2 else "ok", http_status=404 if i % 2 else 200)
              for i in range(6)]

    async def write() -> None:
        sink = await open_sink(home / "ledger.db")
        try:
            await sink.write(events)
        finally:
            await sink.close()

    asyncio.run(write())
    rows = json.loads(_run(home, "usage", "top", "--by", "model", "--format", "json"))
    assert [r["model"] for r in rows] == ["gpt-x"]
    every = json.loads(_run(home, "usage", "--by", "tenant", "--format", "json"))
    assert sum(r["client_errors"] for r in every) == 3  # counted there instead
