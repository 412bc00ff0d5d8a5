"""A session cap reached in the middle of a stream ends it the way any budget does:
``finish_reason: "length"`` and a ``tokenplane`` note naming the session's code."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.gateway.harness import GatewayThread, sim_config


def test_a_session_cap_ends_a_stream(tmp_path: Path) -> None:
    cfg = sim_config(replicas=1)
    # reserve 8 output tokens, then debit 16 at a time as the stream goes
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "debit_granularity": 16}
    cfg["sessions"] = {"budget": {"max_tokens": 120}}
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        key = gw.create_key("acme", app="agent")
        body = {"model": "sim-llama3-8b", "stream": True, "max_tokens": 400,
                "messages": [{"role": "user", "content": "Write a long story."}]}
        with httpx.stream("POST", gw.base_url + "/chat/completions", json=body, timeout=30,
                          headers={"authorization": f"Bearer {key}",
                                   "x-tokenplane-session": "story-1"}) as resp:
            assert resp.status_code == 200
            events = [json.loads(line[6:]) for line in resp.iter_lines()
                      if line.startswith("data: {")]
    finally:
        gw.stop()
    last = events[-1]
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["tokenplane"]["stopped_by"] == "budget"
    assert last["tokenplane"]["code"] == "session_budget_exceeded"
    texts = sum(1 for e in events if e.get("choices") and e["choices"][0]["delta"].get("content"))
    assert 0 < texts < 120
    row = gw.ledger_rows("session_id = 'story-1'")[0]
    assert "budget_stopped" in json.loads(row["flags"])
    assert row["input_tokens"] + row["output_tokens"] <= 120 + 16  # one debit past, at most
