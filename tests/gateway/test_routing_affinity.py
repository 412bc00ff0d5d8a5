"""Session and prefix affinity through the gateway; the scheduler switched off."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.pipeline.schedule_stage import ScheduleStage

ALIAS = "sim-llama3-8b"


def _post(c: httpx.Client, key: str, messages: list[dict[str, str]],
          headers: dict[str, str] | None = None) -> str:
    r = c.post("/chat/completions", json={"model": ALIAS, "max_tokens": 2, "messages": messages},
               headers={"authorization": f"Bearer {key}", **(headers or {})})
    assert r.status_code == 200, r.text
    return r.headers["x-request-id"]


def test_session_and_prefix_affinity_without_the_scheduler(tmp_path: Path) -> None:
    cfg = sim_config(replicas=3)
    cfg["scheduling"] = {"enabled": False}
    gw = GatewayThread(cfg, tmp_path).start()
    assert not any(isinstance(s, ScheduleStage) for s in gw.gateway.pipeline.stages)
    key = gw.create_key("default", app="aff")
    doc = "The quarterly report says revenue grew in every region. " * 60
    sessions: dict[str, list[str]] = {"s1": [], "s2": []}
    prefixed: list[str] = []
    spread: list[str] = []
    try:
        with httpx.Client(base_url=gw.base_url, timeout=30) as c:
            for i in range(4):
                for s in sessions:
                    sessions[s].append(_post(c, key, [{"role": "user", "content": f"q{i}"}],
                                             {"x-session-id": s}))
                prefixed.append(_post(c, key, [{"role": "system", "content": doc},
                                               {"role": "user", "content": f"question {i}"}]))
            for i in range(6):
                spread.append(_post(c, key, [{"role": "user", "content": f"short {i}"}]))
    finally:
        gw.stop()
    backend = {r["request_id"]: r["backend"] for r in gw.ledger_rows("app = 'aff'")}
    for ids in sessions.values():
        assert len({backend[i] for i in ids}) == 1  # a session stays on its replica
    assert len({backend[i] for i in prefixed}) == 1  # a long shared prefix too
    assert len({backend[i] for i in spread}) == 3  # no affinity: spread evenly
