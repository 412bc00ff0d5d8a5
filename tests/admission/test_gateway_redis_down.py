"""Redis stopped during traffic, through a real gateway: fail_closed answers 503 (and
ends a running stream cleanly), fail_open serves on local limits with metrics; both
recover when Redis returns. Uses a private redis-server (never the machine's)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.meta.limit_store import LimitTarget

MODEL = "sim-llama3-8b"
MESSAGES: list[Any] = [{"role": "user", "content": "Tell me a story."}]


class PrivateRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # blocks until the server says it is ready
            if b"Ready to accept connections" in line:
                return
        raise AssertionError("redis-server exited before it was ready")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is required in CI but is not on PATH")
        pytest.skip("redis-server is not on PATH")
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()


def _metric(gw: GatewayThread, name: str) -> float:
    for line in gw.gateway.metrics.render().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"metric {name} not exported")


@pytest.mark.parametrize("mode", ["fail_closed", "fail_open"])
def test_redis_stopped_during_traffic_then_back(private_redis: PrivateRedis, tmp_path: Path,
                                                mode: str) -> None:
    cfg = sim_config(replicas=1, profile="llama3-8b-a100")
    cfg["redis_url"] = f"redis://127.0.0.1:{private_redis.port}/0"
    cfg["admission"] = {"failure_mode": mode, "replicas": 2, "probe_interval_s": 0,
                        "predict_output": False, "default_output_tokens": 8,
                        "limits_reload_s": 0}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        svc = gw.gateway.admission
        assert svc is not None
        svc.limits.set(LimitTarget("acme"), {"rpm": 1000, "tpm": 1_000_000})
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("acme", app="a"),
                               max_retries=0)
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)

        stream = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                max_tokens=80, stream=True)
        chunks = [next(stream)]
        private_redis.stop()  # Redis dies while the stream runs
        chunks.extend(stream)  # iterating raises nothing in either mode
        content = [c for c in chunks if c.choices and c.choices[0].delta.content]
        assert chunks[-1].choices[0].finish_reason == "length"
        if mode == "fail_closed":
            assert len(content) < 80
            assert chunks[-1].model_extra["tokenplane"]["code"] == "admission_unavailable"

            async def engine_stats() -> tuple[int, int]:
                stats = gw.gateway.services[0].engine.stats()
                return stats.num_running, stats.generation_tokens_total

            running, generated = gw.call(engine_stats())
            assert running == 0 and generated < 5 + 80  # the upstream was cancelled
            with pytest.raises(openai.InternalServerError) as info:
                client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)
            assert info.value.status_code == 503
            assert info.value.code == "admission_unavailable"
            assert "unavailable" in info.value.message
            assert _metric(gw, 'tokenplane_admission_unavailable_total{tenant="acme"}') >= 1
        else:
            assert len(content) == 80  # debits allowed (and counted) while Redis is down
            served = client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                    max_tokens=5)
            assert served.choices[0].finish_reason == "length"
            assert _metric(gw, "tokenplane_admission_store_fallback_ops_total") >= 1
            assert _metric(gw, "tokenplane_admission_store_unenforced_debits_total") >= 1
        assert _metric(gw, "tokenplane_admission_store_degraded") == 1
        assert _metric(gw, "tokenplane_admission_store_unavailable_total") >= 1

        private_redis.start()  # back on the same port: the next request uses it again
        client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=5)
        assert _metric(gw, "tokenplane_admission_store_recoveries_total") == 1
        assert _metric(gw, "tokenplane_admission_store_degraded") == 0
        client.close()
    finally:
        gw.stop()
