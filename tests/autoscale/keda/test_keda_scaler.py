"""The KEDA external scaler against a gRPC client speaking KEDA's
``externalscaler.proto``: a real grpc.aio server on a loopback port, the decisions
written through the KEDA actuator as the autoscaler writes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest

from tokenplane.autoscale.gateway.keda.actuator import KedaActuator
from tokenplane.autoscale.gateway.keda.board import Desired, DesiredBoard
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2 as pb
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc
from tokenplane.autoscale.gateway.keda.server import KedaScalerServer


@dataclass
class Scaler:
    board: DesiredBoard
    llama: KedaActuator
    stub: pb_grpc.ExternalScalerStub
    server: KedaScalerServer


@pytest.fixture
async def scaler() -> AsyncIterator[Scaler]:
    board = DesiredBoard()
    llama = KedaActuator(board, "llama3-8b", Desired(serving=0, warm=0))
    KedaActuator(board, "qwen-7b", Desired(serving=2, warm=0))
    server = KedaScalerServer(board, "127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield Scaler(board, llama, pb_grpc.ExternalScalerStub(channel), server)
    finally:
        await channel.close()
        await server.stop(0)


def ref(pool: str | None = "llama3-8b", **extra: str) -> pb.ScaledObjectRef:
    metadata = {"scalerAddress": "tokenplane-gateway.tokenplane:9465", **extra}
    if pool is not None:
        metadata["pool"] = pool
    return pb.ScaledObjectRef(name="engine-llama3-8b", namespace="tokenplane",
                              scalerMetadata=metadata)


async def metric(s: Scaler, obj: pb.ScaledObjectRef) -> float:
    spec = await s.stub.GetMetricSpec(obj)
    name = spec.metricSpecs[0].metricName
    got = await s.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=obj, metricName=name))
    assert [v.metricName for v in got.metricValues] == [name]
    value = got.metricValues[0]
    assert value.metricValue == int(value.metricValueFloat)
    return value.metricValueFloat


async def test_metric_spec_is_one_replica_per_unit(scaler: Scaler) -> None:
    got = await scaler.stub.GetMetricSpec(ref())
    assert len(got.metricSpecs) == 1
    spec = got.metricSpecs[0]
    assert spec.metricName == "tokenplane-llama3-8b-serving-replicas"
    assert spec.targetSizeFloat == 1.0
    assert spec.targetSize == 1  # the deprecated integer field, for older KEDA
    warm = await scaler.stub.GetMetricSpec(ref(count="warm"))
    assert warm.metricSpecs[0].metricName == "tokenplane-llama3-8b-warm-replicas"


async def test_get_metrics_follows_the_decisions(scaler: Scaler) -> None:
    assert await metric(scaler, ref()) == 0.0
    await scaler.llama.scale_to(3, 1)
    assert scaler.llama.current() == Desired(serving=3, warm=1)
    assert await metric(scaler, ref()) == 3.0
    assert await metric(scaler, ref(count="serving")) == 3.0
    assert await metric(scaler, ref(count="warm")) == 1.0
    assert await metric(scaler, ref(count="total")) == 4.0
    await scaler.llama.scale_to(5, 0)
    assert await metric(scaler, ref()) == 5.0
    assert await metric(scaler, ref(count="total")) == 5.0
    # Another pool's decisions are its own.
    assert await metric(scaler, ref("qwen-7b")) == 2.0


async def test_is_active_is_desired_above_zero(scaler: Scaler) -> None:
    assert (await scaler.stub.IsActive(ref())).result is False
    await scaler.llama.scale_to(0, 1)
    assert (await scaler.stub.IsActive(ref())).result is False
    assert (await scaler.stub.IsActive(ref(count="warm"))).result is True
    assert (await scaler.stub.IsActive(ref(count="total"))).result is True
    await scaler.llama.scale_to(2, 0)
    assert (await scaler.stub.IsActive(ref())).result is True
    assert (await scaler.stub.IsActive(ref(count="warm"))).result is False


async def test_stream_is_active_pushes_each_flip_only(scaler: Scaler) -> None:
    stream = scaler.stub.StreamIsActive(ref())
    assert (await stream.read()).result is False  # the state at once
    await scaler.llama.scale_to(2, 0)
    assert (await stream.read()).result is True
    # 2 -> 3 -> 0: still active at 3, so the next message is the flip to inactive,
    # not a repeat of "active".
    await scaler.llama.scale_to(3, 0)
    await scaler.llama.scale_to(0, 0)
    assert (await stream.read()).result is False
    # A change of another pool or of the warm count wakes the stream but sends nothing.
    await KedaActuator(scaler.board, "mixtral", Desired(1, 0)).scale_to(4, 0)
    await scaler.llama.scale_to(0, 2)
    await scaler.llama.scale_to(1, 2)
    assert (await stream.read()).result is True
    stream.cancel()


async def test_stream_ends_when_the_scaler_stops(scaler: Scaler) -> None:
    stream = scaler.stub.StreamIsActive(ref())
    assert (await stream.read()).result is False
    await scaler.server.stop(0)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stream.read()
    assert err.value.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)


@pytest.mark.parametrize("method", ["IsActive", "GetMetricSpec", "GetMetrics", "StreamIsActive"])
async def test_unknown_pool_is_not_found(scaler: Scaler, method: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(scaler, method, ref("no-such-alias"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    details = err.value.details() or ""
    assert "tokenplane/engine-llama3-8b" in details
    assert "'no-such-alias'" in details and "llama3-8b, qwen-7b" in details
    # The scaler still answers.
    assert (await scaler.stub.IsActive(ref("qwen-7b"))).result is True


@pytest.mark.parametrize(
    ("obj", "words"),
    [(ref(None), "no 'pool'"), (ref(pool="  "), "no 'pool'"),
     (ref(count="replicas"), "'count' is 'replicas'")],
)
@pytest.mark.parametrize("method", ["IsActive", "GetMetricSpec", "GetMetrics", "StreamIsActive"])
async def test_bad_metadata_is_invalid_argument(
    scaler: Scaler, method: str, obj: pb.ScaledObjectRef, words: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(scaler, method, obj)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in (err.value.details() or "")
    assert (await scaler.stub.IsActive(ref("qwen-7b"))).result is True


async def test_stream_metric_spec_is_unimplemented(scaler: Scaler) -> None:
    """KEDA falls back to polling GetMetricSpec on UNIMPLEMENTED; the target never
    changes (1 per replica), so there is nothing to push."""
    stream = scaler.stub.StreamMetricSpec(ref())
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stream.read()
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def call(s: Scaler, method: str, obj: pb.ScaledObjectRef) -> object:
    if method == "IsActive":
        return await s.stub.IsActive(obj)
    if method == "GetMetricSpec":
        return await s.stub.GetMetricSpec(obj)
    if method == "GetMetrics":
        return await s.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=obj))
    return await s.stub.StreamIsActive(obj).read()
