"""The advisor's MCP findings: a tool called again with the same arguments in a session
(cache it), a tool whose result tokens mostly never reach a model."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.harness import GatewayThread
from tests.mcp.test_gateway import client, mcp_url
from tokenplane.advice.model import Rates, Thresholds, Window
from tokenplane.advice.tool_calls import repeated_calls, tool_aggregates, unused_results


def _call(i: int, session: str | None, args: str, tokens: int, upstream: int | None = None,
          digest: str = "d") -> dict[str, Any]:
    return {"kind": "mcp", "method": "tools/call", "decision": "allow", "tenant": "t",
            "app": "a", "server": "fs", "name": "read", "model": "m", "ts": float(i),
            "tokens": {"result": tokens, **({"upstream": upstream} if upstream else {})},
            "session": {"id": session} if session else None, "mcp_session": "mcp1",
            "args_digest": args, "result_digests": [f"{digest}{i}"]}


def test_aggregates_count_repeats_and_unused_results() -> None:
    records = [_call(i, "s1", "same" if i % 2 else f"x{i}", 100) for i in range(30)]
    # steps of s1 carried the results of the even calls only
    records.append({"kind": "request", "tenant": "t", "ts": 99.0,
                    "session": {"id": "s1", "tool_results": [f"d{i}" for i in range(0, 30, 2)]}})
    records.append(_call(50, None, "same", 100))  # another tenant's view: filtered below
    records[-1]["tenant"] = "other"
    (agg,) = tool_aggregates(records, "t", "USD")
    assert agg.calls == 30 and agg.repeat_calls == 14 and agg.repeat_tokens == 1400
    assert agg.session_calls == 30 and agg.unused_calls == 15 and agg.unused_tokens == 1500
    window = Window(0.0, 86400.0)
    th = Thresholds()
    (repeat,) = repeated_calls([agg], lambda _: Rates(input=__import__("decimal").Decimal(2)),
                               window, th)
    assert repeat.kind == "tool_repeat_calls" and repeat.tokens_per_month == 1400 * 30
    assert repeat.cost_micros_per_month == 1400 * 30 * 2
    (dropped,) = unused_results([agg], lambda _: Rates(), window, th)
    assert dropped.kind == "tool_results_dropped" and dropped.tokens_per_month == 1500 * 30
    cut = tool_aggregates([_call(i, None, f"x{i}", 100, upstream=400) for i in range(20)],
                          None)
    assert cut[0].upstream_tokens == 8000 and cut[0].unused_calls == 0
    (f,) = unused_results(cut, lambda _: Rates(), window, th)
    assert f.evidence["figures"]["truncated_tokens"] == 6000  # type: ignore[index]
    assert not repeated_calls(cut, lambda _: Rates(), window, th)


async def test_advice_route_finds_a_tool_called_again_with_the_same_arguments(
        gw: GatewayThread) -> None:
    key = gw.create_key("globex", app="bot")
    text = " ".join(f"w{i}" for i in range(700))
    async with client(mcp_url(gw), key, **{"x-tokenplane-session": "loop-1"}) as c:
        for _ in range(22):
            await c.call_tool("crm__echo", {"text": text})
    audit = gw.gateway.governance.audit  # type: ignore[union-attr]
    assert audit is not None
    gw.call(audit.flush())
    r = httpx.get(f"http://127.0.0.1:{gw.port}/admin/v1/advice",
                  params={"since": "1d"}, headers={"authorization": f"Bearer {key}",
                                                   "cache-control": "no-cache"}, timeout=60)
    assert r.status_code == 200, r.text
    doc = r.json()
    kinds = {f["kind"]: f for f in doc["findings"]}
    assert "tool_repeat_calls" in kinds, doc
    found = kinds["tool_repeat_calls"]
    assert found["app"] == "bot" and "crm__echo" in found["title"]
    assert found["evidence"]["figures"]["repeat_calls"] == 21
    # no model request of the session carried the echoes: all of their tokens unused
    assert kinds["tool_results_dropped"]["evidence"]["figures"]["unused_calls"] == 22
    assert "tool_repeat_calls" not in doc["not_evaluated"]
