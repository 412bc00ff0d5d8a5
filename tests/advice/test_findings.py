"""Each finding kind from a ledger built to contain it (events through the real sink,
SQLite and PostgreSQL), and none from a healthy ledger."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.advice import ledgers
from tests.advice.ledgers import DAY, NOW, Ledger
from tokenplane.advice.advisor import KINDS
from tokenplane.advice.gateway.source import gather_advice
from tokenplane.metering.stores.open import open_sink


async def _advice(target: str, led: Ledger, **kw: Any) -> dict[str, Any]:
    sink = await open_sink(target)
    try:
        await led.write(sink)
        return await gather_advice(sink, since=NOW - 30 * DAY, now=NOW, **kw)
    finally:
        await sink.close()


def _kinds(doc: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in doc["findings"]}


async def test_a_healthy_ledger_has_no_findings(sink_target: str) -> None:
    doc = await _advice(sink_target, ledgers.clean())
    assert doc["findings"] == []
    assert doc["total"]["findings"] == 0
    assert doc["kinds"] == list(KINDS) and doc["not_evaluated"] == {}


@pytest.mark.parametrize("kind", sorted(ledgers.FIXTURES))
async def test_each_kind_is_found_where_built(sink_target: str, kind: str) -> None:
    doc = await _advice(sink_target, ledgers.FIXTURES[kind]())
    found = [f for f in doc["findings"] if f["kind"] == kind]
    assert len(found) == 1, doc["findings"]
    f = found[0]
    assert f["tenant"] == "acme"
    assert f["evidence"]["query"].startswith("SELECT") and f["evidence"]["figures"]
    assert f["action"]
    saving = f["saving"]
    assert saving["currency"] == "USD"
    assert saving["tokens_per_month"] > 0 or saving["cost_micros_per_month"] > 0
    CHECKS[kind](f)


def _template(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert f["app"] == "support" and fig["template"] == "fp-fat"
    assert fig["lean_template"] == "fp-lean" and fig["ratio"] == pytest.approx(800 / 300, 0.01)
    assert "2.7x the input tokens" in f["title"]
    # 500 extra tokens on 30 requests in 3.5 days, scaled to 30 days, at 2.50 per 1M
    tokens = f["saving"]["tokens_per_month"]
    assert tokens == pytest.approx(500 * 30 * 30 / 3.5, rel=0.01)
    assert f["saving"]["cost_micros_per_month"] == pytest.approx(tokens * 2.5, rel=0.001)


def _cacheable(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert f["app"] == "agent"
    # 40 prompts of 1200 tokens, 1000 of them the system prompt, first one a day a write
    assert fig["cacheable_share"] == 0.75 and fig["already_cached_tokens"] == 0
    # the repeats at 2.50 - 1.25, less one write a day at the 3.125 - 2.50 premium
    repeats, writes = fig["repeated_prefix_tokens"], fig["cache_write_tokens"]
    assert writes == 4 * 1000  # four days, one template
    scale = 30 / 3.5
    expect = repeats * scale * 1.25 - writes * scale * 0.625
    assert f["saving"]["cost_micros_per_month"] == pytest.approx(expect, rel=0.001)


async def test_a_stable_agent_system_prompt_without_cache_control(tmp_path: Any) -> None:
    """A coding agent's 12k-token system prompt sent through Messages with no
    cache_control marker (nothing read from or written to a cache) is found, and the
    advice says how to mark it."""
    led = ledgers.clean()
    led.add(40, app="claude-code", system=12000, user=300, cached=0, operation="messages",
            client="claude-cli", system_fingerprint="fp-cc")
    doc = await _advice(str(tmp_path / "ledger.db"), led)
    found = [f for f in doc["findings"] if f["kind"] == "cacheable_prefixes"]
    assert len(found) == 1 and found[0]["app"] == "claude-code"
    assert found[0]["evidence"]["figures"]["cacheable_share"] > 0.85  # all but each day's first
    assert "cache_control" in found[0]["action"]
    assert found[0]["saving"]["cost_micros_per_month"] > 0


def _verbose(f: dict[str, Any]) -> None:
    assert f["app"] == "writer" and f["details"]["reason"] == "length"
    assert f["evidence"]["figures"]["length_share"] == 0.25
    cap = f["details"]["suggested_max_tokens"]
    assert cap % 64 == 0 and 300 < cap <= 704


def _version(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert fig["version"] == "2026-06" and fig["other_version"] == "2026-05"
    assert "45% more output tokens" in f["title"]


def _right_sizing(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert (f["app"], f["model"], fig["cheaper_model"]) == ("triage", "big", "small")
    assert fig["feedback"] == 25 and fig["cheaper_feedback"] == 25
    assert f["saving"]["tokens_per_month"] == 0
    assert f["saving"]["cost_micros_per_month"] == pytest.approx(
        (fig["cost_micros"] - fig["cost_micros_at_cheaper"]) * 30 / 3.5, rel=0.001)


def _context(f: dict[str, Any]) -> None:
    assert f["app"] == "rag" and f["evidence"]["figures"]["kept_share"] == 0.25
    assert f["saving"]["cost_micros_per_month"] == 0


def _history(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert f["app"] == "companion" and fig["history_share"] > 0.8
    assert fig["growth_later_half_over_earlier"] > 1.5


def _tool_output(f: dict[str, Any]) -> None:
    fig = f["evidence"]["figures"]
    assert f["app"] == "agent" and fig["tool_output_share"] == 0.4
    assert f["saving"]["tokens_per_month"] == pytest.approx(400 * 30 * 30 / 3.5, rel=0.01)


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "template_waste": _template, "cacheable_prefixes": _cacheable,
    "verbose_outputs": _verbose, "version_efficiency": _version,
    "right_sizing": _right_sizing, "context_dropped": _context,
    "history_growth": _history, "tool_output_bloat": _tool_output,
}


@pytest.mark.parametrize("kind", sorted(ledgers.FIXTURES))
async def test_only_the_built_kind_is_found(tmp_path: Any, kind: str) -> None:
    doc = await _advice(str(tmp_path / "ledger.db"), ledgers.FIXTURES[kind]())
    assert _kinds(doc) == {kind}


async def test_near_misses_are_not_findings(tmp_path: Any) -> None:
    led = ledgers.clean()
    led.add(30, app="support", system=200, system_fingerprint="fp-a")
    led.add(30, app="support", system=300, system_fingerprint="fp-b")  # 1.33x: under 1.5x
    led.add(30, app="summary", model_version="a", output=110)
    led.add(30, app="summary", model_version="b", output=135)  # 23% more: under 30%
    led.add(40, app="writer", output=150,
            finish=lambda i: "length" if i % 20 == 0 else "stop")  # 5%: under 10%
    big = led.add(30, app="triage", model="big")
    small = led.add(30, app="triage", model="small")
    led.score(big[:25], 0.9)
    led.score(small[:25], 0.7)  # the cheaper alias scores clearly worse
    doc = await _advice(str(tmp_path / "ledger.db"), led)
    assert doc["findings"] == []


async def test_right_sizing_needs_feedback_and_few_errors(tmp_path: Any) -> None:
    led = ledgers.clean()
    big = led.add(30, app="triage", model="big")
    small = led.add(30, app="triage", model="small")
    led.score(big[:10], 0.8)  # too few scores to compare
    led.score(small[:10], 0.8)
    doc = await _advice(str(tmp_path / "a.db"), led)
    assert "right_sizing" not in _kinds(doc)
    led = ledgers.clean()
    big = led.add(30, app="triage", model="big")
    small = led.add(25, app="triage", model="small")
    small += led.add(5, app="triage", model="small", status="error", http_status=500,
                     output=0)
    led.score(big[:25], 0.8)
    led.score(small[:25], 0.8)
    doc = await _advice(str(tmp_path / "b.db"), led)
    assert "right_sizing" not in _kinds(doc)  # the cheaper one fails 17% of the time


async def test_tenant_scope_and_window(sink_target: str) -> None:
    led = ledgers.template_waste()
    led.add(30, tenant="globex", app="support", system=200, system_fingerprint="g-lean")
    led.add(30, tenant="globex", app="support", system=900, system_fingerprint="g-fat")
    sink = await open_sink(sink_target)
    try:
        await led.write(sink)
        everyone = await gather_advice(sink, since=NOW - 30 * DAY, now=NOW)
        acme = await gather_advice(sink, since=NOW - 30 * DAY, now=NOW, tenant="acme")
        later = await gather_advice(sink, since=NOW + DAY, until=NOW + 2 * DAY, now=NOW)
    finally:
        await sink.close()
    assert {f["tenant"] for f in everyone["findings"]} == {"acme", "globex"}
    assert {f["tenant"] for f in acme["findings"]} == {"acme"}
    assert later["findings"] == []
