"""A gateway autoscaling a pool through KEDA, from zero: with no traffic the pool's
decision is 0 replicas and the scaler says inactive; traffic from the official
``openai`` client makes the policy ask for replicas on token demand, and a gRPC
client holding KEDA's ``StreamIsActive`` stream is told at once, then reads the
desired count with ``GetMetrics``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import openai
import pytest

from tests.gateway.harness import GatewayThread, free_port
from tokenplane.autoscale.gateway.keda.actuator import KedaActuator
from tokenplane.autoscale.gateway.keda.board import Desired
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2 as pb
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc


def config(keda_port: int) -> dict[str, Any]:
    """One alias on one in-process replica (it keeps serving whatever KEDA does: here
    nothing acts on the decision), decided every 0.2 s, allowed down to zero, each
    replica good for 200 tokens/s."""
    return {
        "models": [{
            "alias": "chat", "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 4096,
            "backends": [{"id": "sim", "type": "sim", "profile": "llama3-8b-a100",
                          "replicas": 1}],
        }],
        "tenants": [{"name": "default"}],
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
        "autoscale": {
            "interval": 0.2,
            "pools": {"chat": {
                "actuator": "keda", "min_replicas": 0, "max_replicas": 4, "max_step": 4,
                "scale_up_window": 0, "scale_down_window": 0, "warm_max": 0,
                "replica_tokens_per_s": 200,
            }},
            "keda": {"listen": f"127.0.0.1:{keda_port}"},
        },
    }


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[GatewayThread, int]]:
    port = free_port()
    gw = GatewayThread(config(port), tmp_path / "gw").start()
    yield gw, port
    if gw.server is not None:
        gw.stop()


def test_traffic_activates_a_pool_at_zero_through_keda(
    gateway: tuple[GatewayThread, int],
) -> None:
    gw, port = gateway
    ctl = gw.gateway.autoscale
    assert ctl is not None
    actuator = ctl.pools["chat"].actuator
    assert isinstance(actuator, KedaActuator) and actuator.kind == "keda"
    gw.call(actuator.board.wait_changed(0))  # the first round decides at once
    assert actuator.board.get("chat") == Desired(serving=0, warm=0)

    ref = pb.ScaledObjectRef(name="engine-chat", namespace="default",
                             scalerMetadata={"pool": "chat"})
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        assert stub.IsActive(ref).result is False
        stream = stub.StreamIsActive(ref, timeout=60)
        assert next(stream).result is False

        key = gw.create_key("default")
        errors: list[BaseException] = []

        def client() -> None:
            try:
                with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0,
                                   timeout=60) as c:
                    r = c.chat.completions.create(
                        model="chat", max_tokens=64,
                        messages=[{"role": "user", "content": "Tell me about KEDA."}])
                    assert r.usage is not None and r.usage.completion_tokens == 64
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        assert next(stream).result is True  # pushed when the decision flips
        stream.cancel()
        decision = ctl.pools["chat"].decision
        assert decision is not None and decision.serving_to >= 1
        spec = stub.GetMetricSpec(ref).metricSpecs[0]
        got = stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref,
                                                   metricName=spec.metricName))
        desired = actuator.board.get("chat")
        assert desired is not None and desired.serving >= 1
        assert got.metricValues[0].metricValueFloat == desired.serving
        for t in threads:
            t.join()
    assert errors == []
    reasons = {r for d in ctl.decisions.recent for r in d.get("reasons", [])}
    assert "token_demand" in reasons
