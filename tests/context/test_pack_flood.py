"""A flood of ``POST /v1/context/pack`` from one tenant against another tenant's
latency, through a real gateway process (issue 33, finding 1): the packing runs off
the event loop, in turn per tenant, so the victim's requests keep being answered.
The bound is generous (this is a shared two-core machine); the figure itself is
``bench/bench_pack_flood.py``'s. Before the fix the packs ran on the loop and the
victim's p90 went from milliseconds to the length of a pack (~0.5 s and more)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import yaml

from tests.gateway.gateway_process import GatewayProcess, create_key

ROOT = Path(__file__).resolve().parents[2]
FLOOD = ROOT / "bench" / "bench_pack_flood.py"
MODEL = "m"

pytestmark = pytest.mark.timeout(240)


def _victim(base: str, key: str, seconds: float) -> list[float]:
    lat: list[float] = []
    stop = time.monotonic() + seconds
    with httpx.Client(base_url=base, timeout=60,
                      headers={"authorization": f"Bearer {key}"}) as h:
        i = 0
        while time.monotonic() < stop:
            i += 1
            t0 = time.perf_counter()
            r = h.post("/chat/completions", json={"model": MODEL, "max_tokens": 4, "messages": [
                {"role": "user", "content": f"Say hello ({i})"}]})
            lat.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text
    return lat


def _p90(lat: list[float]) -> float:
    return statistics.quantiles(lat, n=10)[-1]


def test_a_pack_flood_does_not_hold_other_tenants(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    env["TOKENPLANE_HOME"] = str(home)
    cfg = {"models": [{"alias": MODEL, "tokenizer": "cl100k_base", "context_window": 131072,
                       "backends": [{"id": "sim", "type": "sim", "profile": "instant"}]}],
           "tenants": [{"name": "victim"}, {"name": "attacker"}],
           "server": {"max_body_bytes": 8_000_000}, "context": {"max_characters": 4_000_000},
           "governance": {"enabled": False}, "observe": {"access_log": {"enabled": False}}}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    victim, attacker = create_key(env, "victim", "v"), create_key(env, "attacker", "a")
    gw = GatewayProcess(path, env, tmp_path / "gateway.log")
    flood: subprocess.Popen[bytes] | None = None
    try:
        _victim(gw.base_url, victim, 1.0)  # warm up
        calm = _victim(gw.base_url, victim, 3.0)
        # 8 connections of 128 documents of 16 KB (2 MB) each, back to back
        flood = subprocess.Popen(
            [sys.executable, str(FLOOD), "--attack", gw.base_url, attacker, "--seconds", "8",
             "--connections", "8", "--docs", "128", "--kb", "16", "--bodies", "16"],
            env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
            stdout=subprocess.PIPE)
        assert flood.stdout is not None
        assert flood.stdout.readline().strip() == b"ready"
        time.sleep(1.5)  # the flood under way
        hit = _victim(gw.base_url, victim, 4.0)
        out, _ = flood.communicate(timeout=120)
        statuses = orjson.loads(out.decode().strip().splitlines()[-1])["attack_statuses"]
        assert statuses.get("200", 0) > 0  # the packs were served meanwhile
    finally:
        if flood is not None and flood.poll() is None:
            flood.kill()
        gw.close()
    calm_p90, hit_p90 = _p90(calm), _p90(hit)
    assert len(hit) >= 20, (len(hit), hit_p90)
    assert hit_p90 <= 5 * calm_p90 + 0.25, (calm_p90, hit_p90)
