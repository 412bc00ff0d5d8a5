"""Replay of recorded traffic (issue 14): real traffic through a real gateway (simulated
engines, the official openai client), then ``tokenplane replay`` from its ledger.

With the same config the replay gives the recorded counts back exactly (requests,
tokens by source, refusals, the very requests refused); with a tighter limit it refuses
exactly the extra requests that limit implies; the export is a trace `simulate` reads,
whose block ids share the prefix the requests shared."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from typer.testing import CliRunner

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.cli.main import build_cli
from tokenplane.meta.limit_store import LimitTarget
from tokenplane.sim.traces import load_mooncake_jsonl

MODEL = "sim-llama3-8b"
SYSTEM = "You are a careful assistant. " + "Follow the house style guide. " * 120


def _config() -> dict[str, Any]:
    cfg = sim_config(replicas=2, profile="instant")
    cfg["tenants"] = [{"name": "acme"}, {"name": "globex"}]
    cfg["admission"] = {"default_output_tokens": 8, "predict_output": False,
                        "limits_reload_s": 0}
    cfg["slos"] = [{"name": "chat", "selector": {"model": MODEL},
                    "slis": [{"kind": "availability"}, {"kind": "ttft", "threshold": "1s"}],
                    "objective": 0.99, "window": "1d"}]
    return cfg


class Recorded:
    def __init__(self, home: Path, config: Path, rows: list[dict[str, Any]],
                 acme_order: list[str]) -> None:
        self.home, self.config, self.rows, self.acme_order = home, config, rows, acme_order


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    home = Path(tmp_path_factory.mktemp("replay"))
    cfg = _config()
    gw = GatewayThread(cfg, home).start()
    acme_order: list[str] = []
    try:
        svc = gw.gateway.admission
        assert svc is not None
        svc.limits.set(LimitTarget("acme"), {"rpm": 6})
        acme = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("acme", app="chat"),
                             max_retries=0)
        globex = openai.OpenAI(base_url=gw.base_url,
                               api_key=gw.create_key("globex", app="batch"), max_retries=0)
        for i in range(10):
            stream = i % 2 == 1
            try:
                raw = acme.chat.completions.with_raw_response.create(
                    model=MODEL, max_tokens=5 + i, stream=stream,
                    messages=[{"role": "system", "content": SYSTEM},
                              {"role": "user", "content": f"Question number {i}?"}])
                acme_order.append(raw.headers["x-request-id"])
                if stream:
                    list(raw.parse())
            except openai.RateLimitError as exc:
                acme_order.append(exc.response.headers["x-request-id"])
        for i in range(4):
            globex.chat.completions.create(
                model=MODEL, max_tokens=7,
                messages=[{"role": "user", "content": f"Summarise report {i} " * 40}])
        acme.close()
        globex.close()
    finally:
        gw.stop()
    config = home / "gateway.yaml"
    config.write_text(yaml.safe_dump({**cfg, "data_dir": str(home)}))
    yield Recorded(home, config, gw.ledger_rows(), acme_order)


def _replay(rec: Recorded, out: Path, *extra: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        build_cli(), ["replay", "--since", "1h", "--config", str(rec.config), "--out",
                      str(out), "--home", str(rec.home), *extra])
    assert result.exit_code == 0, result.output
    loaded: dict[str, Any] = json.loads((out / "replay.json").read_text())
    return loaded


def test_the_gateway_records_prefix_fingerprints(recorded: Recorded) -> None:
    ok = [r for r in recorded.rows if r["tenant"] == "acme" and r["http_status"] == 200]
    assert len(ok) == 6
    segs = [json.loads(r["prefix_segments"]) for r in ok]
    # the shared system prompt is one segment with the same chained hash in every request
    assert len({s[0][0] for s in segs}) == 1 and all(s[0][1] >= 32 for s in segs)
    refused = [r for r in recorded.rows if r["http_status"] == 429]
    assert len(refused) == 4 and all(r["prefix_segments"] is None for r in refused)


def test_replay_with_the_same_config_gives_the_recorded_counts_back(
    recorded: Recorded, tmp_path: Path
) -> None:
    res = _replay(recorded, tmp_path)
    rec, prop = res["recorded"], res["proposed"]
    assert res["requests"] == len(recorded.rows) == 14
    for tenant in ("acme", "globex"):
        for key in ("requests", "admitted", "refused", "tokens", "cost_micros"):
            assert prop["tenants"][tenant][key] == rec["tenants"][tenant][key], (tenant, key)
    assert rec["tenants"]["acme"]["refused"] == {"rate_limit_exceeded": 4}
    assert rec["tenants"]["acme"]["tokens"]["system"] > 0  # by source, not just totals
    ledger_refused = {r["request_id"] for r in recorded.rows if r["http_status"] == 429}
    assert set(prop["refusals"]) == ledger_refused
    assert set(ledger_refused) == set(recorded.acme_order[6:])
    # the gateway's own refusals are not valid events of availability; 3 admitted streams
    assert prop["slos"]["chat"]["availability"]["valid"] == 10
    assert rec["slos"]["chat"]["availability"] == prop["slos"]["chat"]["availability"]
    assert prop["slos"]["chat"]["ttft"]["valid"] == 3
    # every admitted request ran on the simulated replicas of the alias
    model = prop["models"][MODEL]
    assert model["replicas"] == 2 and model["completed"] == 10
    assert sum(r["requests"] for r in model["replica_load"]) == 10


def test_a_tighter_limit_refuses_exactly_the_extra_requests(
    recorded: Recorded, tmp_path: Path
) -> None:
    limits = tmp_path / "tighter.yaml"
    limits.write_text(yaml.safe_dump([{"tenant": "acme", "rpm": 3}]))
    res = _replay(recorded, tmp_path / "out", "--limits", str(limits),
                  "--against", str(recorded.config))
    cur, prop = res["current"], res["proposed"]
    assert set(cur["refusals"]) == set(recorded.acme_order[6:])
    assert set(prop["refusals"]) == set(recorded.acme_order[3:])  # 3 more: the 4th..6th
    assert prop["tenants"]["acme"]["refused"] == {"rate_limit_exceeded": 7}
    assert prop["tenants"]["acme"]["refused_by"] == {"tenant:acme rpm": 7}
    assert prop["tenants"]["globex"] == cur["tenants"]["globex"]
    extra = {r["request_id"]: r for r in recorded.rows
             if r["request_id"] in recorded.acme_order[3:6]}
    for kind, column in (("system", "input_system"), ("user", "input_user"),
                         ("output", "output_tokens")):
        lost = sum(r[column] for r in extra.values())
        assert lost > 0
        assert (cur["tenants"]["acme"]["tokens"][kind] - prop["tenants"]["acme"]["tokens"][kind]
                == lost)
    text = (tmp_path / "out" / "diff.txt").read_text()
    assert "refused rate_limit_exceeded" in text and "acme: cost_micros" in text


def test_export_is_a_trace_simulate_reads(recorded: Recorded, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    result = CliRunner().invoke(build_cli(), ["replay", "--since", "1h", "--export",
                                              str(trace), "--home", str(recorded.home)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(lines) == 10  # the admitted requests; no prompt text in it
    assert all(set(x) >= {"timestamp", "input_length", "output_length", "hash_ids"}
               for x in lines)
    acme = [x for x in lines if x["tenant"] == "acme"]
    assert all(x["hash_ids"][:1] == [0] for x in acme)  # the shared system prompt
    assert SYSTEM[:20] not in trace.read_text()
    reqs = load_mooncake_jsonl(trace)
    assert len(reqs) == 10 and reqs[0].arrival == 0.0
    assert reqs[0].block_hashes[:32] == reqs[1].block_hashes[:32]
