"""``tokenplane replay`` reads its workload from either ledger (SQLite, PostgreSQL):
each request's last attempt, its prefix fingerprints, what it recorded. A request the
ledger recorded as refused that the config admits (no limits here) runs with its
counted prompt (``unrecorded`` tokens); a client mistake is carried as recorded; an
upstream fault stays one for the availability SLI."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tests.metering.factories import make_event
from tokenplane.cli.main import build_cli
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink

CONFIG = {
    "models": [{"alias": "gpt-x", "backends": [{"type": "sim", "replicas": 2}]}],
    "slos": [{"name": "avail", "selector": {"model": "gpt-x"},
              "slis": [{"kind": "availability"}], "objective": 0.9, "window": "1d"}],
}


async def _write(target: str, events: list[UsageEvent]) -> None:
    sink = await open_sink(target)
    try:
        await sink.write(events)
    finally:
        await sink.close()


def test_replay_reads_either_ledger(sink_target: str, tmp_path: Path) -> None:
    now = time.time() - 600
    shared = "[[123456789,40],[-42,3]]"
    events = [
        make_event(i, ts=now + i + 2.0, arrival_ts=now + i, upstream_start_ts=now + i + 0.01,
                   first_token_ts=now + i + 0.2, last_token_ts=now + i + 1.9,
                   stream=True, input_tokens=700, input_system=640, input_user=60,
                   prefix_segments=shared, slo_class="interactive")
        for i in range(6)
    ]
    events.append(make_event(0, attempt=1, ts=now + 9, arrival_ts=now + 0.5,
                             upstream_start_ts=now + 1))  # a retry
    events.append(make_event(20, ts=now + 20, arrival_ts=now + 20, status="error",
                             http_status=429, error_code="rate_limit_exceeded",
                             input_tokens=0, input_system=0, input_user=0, output_tokens=0,
                             estimated_input_tokens=333))
    events.append(make_event(21, ts=now + 21, arrival_ts=now + 21, status="error",
                             http_status=400, error_code="invalid_request_error",
                             input_tokens=0, input_system=0, input_user=0, output_tokens=0))
    events.append(make_event(22, ts=now + 23, arrival_ts=now + 22, status="error",
                             http_status=502, error_code="upstream_error",
                             upstream_start_ts=now + 22.1, output_tokens=0))
    asyncio.run(_write(sink_target, events))
    config = tmp_path / "gw.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    where = (["--database-url", sink_target] if sink_target.startswith("postgres")
             else ["--home", str(Path(sink_target).parent)])
    out = tmp_path / "out"
    result = CliRunner().invoke(build_cli(), ["replay", "--since", "1h", "--config",
                                              str(config), "--out", str(out), *where])
    assert result.exit_code == 0, result.output
    res = json.loads((out / "replay.json").read_text())
    assert res["requests"] == 9  # the retry replaced its first attempt
    rec, prop = res["recorded"]["totals"], res["proposed"]["totals"]
    assert rec["refused"] == {"rate_limit_exceeded": 1} and prop["refused"] == {}
    assert prop["admitted"] == rec["admitted"] + 1 == 9
    assert prop["tokens"]["unrecorded"] == 333 and rec["tokens"]["unrecorded"] == 0
    for kind in ("system", "user", "output"):
        assert prop["tokens"][kind] == rec["tokens"][kind] + (256 if kind == "output" else 0)
    model = res["proposed"]["models"]["gpt-x"]
    assert model["requests"] == 8  # 6 + the retried one + the admitted refusal + the 502
    assert model["requests"] + 1 == res["requests"]  # the 400 never reached a replica
    avail = res["proposed"]["slos"]["avail"]["availability"]
    assert avail == {**avail, "valid": 8, "bad": 1}  # the 502; the 400 is not valid
