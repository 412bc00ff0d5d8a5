"""The KEDA external scaler against a gRPC client speaking KEDA's
``externalscaler.proto``: a real grpc.aio server on a loopback port, the decisions
written through the KEDA actuator as the autoscaler writes them."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest

from tokenplane.autoscale.gateway.keda.actuator import KedaActuator
from tokenplane.autoscale.gateway.keda.board import Desired, DesiredBoard
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2 as pb
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc
from tokenplane.autoscale.model import ReplicaView


class Clock:
    """The actuator's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Scaler:
    actuator: KedaActuator
    clock: Clock
    endpoints: dict[str, list[str]]
    stub: pb_grpc.ExternalScalerStub

    @property
    def board(self) -> DesiredBoard:
        return self.actuator.board

    async def decide(self, serving: int, warm: int = 0, pool: str = "llama3-8b") -> None:
        await self.actuator.scale_to(pool, serving, warm)


def found(ids: list[str]) -> list[tuple[str, bool]]:
    """The gateway's endpoints: an id ending in "~" is draining."""
    return [(i.rstrip("~"), i.endswith("~")) for i in ids]


@pytest.fixture
async def scaler() -> AsyncIterator[Scaler]:
    """The actuator of three pools (no start(): the staleness check is the tests' to
    run); llama3-8b and qwen-7b decided, mixtral not yet."""
    clock = Clock()
    endpoints: dict[str, list[str]] = {"llama3-8b": [], "qwen-7b": ["q0", "q1"], "mixtral": []}
    actuator = KedaActuator("127.0.0.1:0", endpoints, lambda p: found(endpoints[p]),
                            interval_s=5.0, clock=clock)
    await actuator.scale_to("llama3-8b", 0, 0)  # the first decision binds the listener
    await actuator.scale_to("qwen-7b", 2, 0)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{actuator.server.port}")
    try:
        yield Scaler(actuator, clock, endpoints, pb_grpc.ExternalScalerStub(channel))
    finally:
        await channel.close()
        await actuator.close()


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
    await scaler.decide(3, 1)
    assert scaler.board.get("llama3-8b") == Desired(serving=3, warm=1)
    assert await metric(scaler, ref()) == 3.0
    assert await metric(scaler, ref(count="serving")) == 3.0
    assert await metric(scaler, ref(count="warm")) == 1.0
    assert await metric(scaler, ref(count="total")) == 4.0
    await scaler.decide(5, 0)
    assert await metric(scaler, ref()) == 5.0
    assert await metric(scaler, ref(count="total")) == 5.0
    # Another pool's decisions are its own.
    assert await metric(scaler, ref("qwen-7b")) == 2.0


async def test_is_active_is_desired_above_zero(scaler: Scaler) -> None:
    assert (await scaler.stub.IsActive(ref())).result is False
    await scaler.decide(0, 1)
    assert (await scaler.stub.IsActive(ref())).result is False
    assert (await scaler.stub.IsActive(ref(count="warm"))).result is True
    assert (await scaler.stub.IsActive(ref(count="total"))).result is True
    await scaler.decide(2, 0)
    assert (await scaler.stub.IsActive(ref())).result is True
    assert (await scaler.stub.IsActive(ref(count="warm"))).result is False


async def test_stream_is_active_pushes_each_flip_only(scaler: Scaler) -> None:
    stream = scaler.stub.StreamIsActive(ref())
    assert (await stream.read()).result is False  # the state at once
    await scaler.decide(2, 0)
    assert (await stream.read()).result is True
    # 2 -> 3 -> 0: still active at 3, so the next message is the flip to inactive,
    # not a repeat of "active".
    await scaler.decide(3, 0)
    await scaler.decide(0, 0)
    assert (await stream.read()).result is False
    # A change of another pool or of the warm count wakes the stream but sends nothing.
    await scaler.decide(4, 0, pool="mixtral")
    await scaler.decide(0, 2)
    await scaler.decide(1, 2)
    assert (await stream.read()).result is True
    stream.cancel()


async def test_stream_ends_when_the_scaler_stops(scaler: Scaler) -> None:
    stream = scaler.stub.StreamIsActive(ref())
    assert (await stream.read()).result is False
    await scaler.actuator.server.stop(0)
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
    assert "'no-such-alias'" in details
    # no pool is named to the caller (issue 33, finding 11)
    assert not any(p in details for p in ("llama3-8b,", "mixtral", "qwen-7b"))
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


@pytest.mark.parametrize("method", ["IsActive", "GetMetricSpec", "GetMetrics", "StreamIsActive"])
async def test_no_decision_yet_is_unavailable(scaler: Scaler, method: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(scaler, method, ref("mixtral"))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "'mixtral' has no decision yet" in (err.value.details() or "")


async def test_a_stale_decision_is_unavailable_and_frees_the_port(scaler: Scaler) -> None:
    """Decisions stop (this process lost the lead): past stale_after_s KEDA is told
    there is none, and the listener is released for the leader to bind."""
    port = scaler.actuator.server.port
    assert scaler.actuator.stale_after_s == 30.0  # 3 rounds of 5 s, at least 30 s
    scaler.clock.now += 29
    await scaler.actuator.release_if_stale()
    assert scaler.actuator.server.serving
    assert (await scaler.stub.IsActive(ref("qwen-7b"))).result is True
    scaler.clock.now += 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await scaler.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref("qwen-7b")))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "last decided 31 s ago (over 30 s)" in (err.value.details() or "")
    await scaler.actuator.release_if_stale()
    assert not scaler.actuator.server.serving
    # The port is free: the process that leads now binds it.
    leader = KedaActuator(f"127.0.0.1:{port}", ["qwen-7b"], lambda p: [], interval_s=5.0)
    await leader.scale_to("qwen-7b", 3, 0)
    assert leader.server.serving
    assert await metric(scaler, ref("qwen-7b")) == 3.0
    await leader.close()


async def test_a_taken_port_is_retried_each_round(scaler: Scaler) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        other = KedaActuator(f"127.0.0.1:{port}", ["chat"], lambda p: [], interval_s=1.0)
        await other.scale_to("chat", 1, 0)  # logged, not raised: the round goes on
        assert not other.server.serving
        assert other.board.get("chat") == Desired(1, 0)
    await other.scale_to("chat", 2, 0)
    assert other.server.serving and other.server.port == port
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        got = await pb_grpc.ExternalScalerStub(channel).IsActive(ref("chat"))
        assert got.result is True
    await other.close()


async def test_replicas_read_against_the_decision(scaler: Scaler) -> None:
    """The gateway's endpoints of the pool, seen against the last decision: serving
    up to the desired count, then warm, then draining; missing ones starting."""
    act, eps = scaler.actuator, scaler.endpoints

    def phases(views: tuple[ReplicaView, ...]) -> list[tuple[str, str]]:
        return [(v.id, v.phase) for v in views]

    eps["llama3-8b"] += ["a", "b", "c"]
    await scaler.decide(2, 1)
    assert phases(await act.replicas("llama3-8b")) == [
        ("a", "serving"), ("b", "serving"), ("c", "warm")]
    await scaler.decide(4, 1)
    scaler.clock.now += 10
    await scaler.decide(4, 1)  # the same decision next round: still starting since then
    views = await act.replicas("llama3-8b")
    assert phases(views) == [("a", "serving"), ("b", "serving"), ("c", "serving"),
                             ("llama3-8b/requested-0", "starting"),
                             ("llama3-8b/requested-1", "starting")]
    assert views[3].since == scaler.clock.now - 10  # starting since the decision
    assert views[0].since == scaler.clock.now - 10  # first seen then
    await scaler.decide(1, 0)
    assert phases(await act.replicas("llama3-8b")) == [
        ("a", "serving"), ("b", "draining"), ("c", "draining")]
    # One the gateway drains is draining whatever the decision; the others fill it.
    eps["llama3-8b"][0] = "a~"
    await scaler.decide(2, 0)
    assert phases(await act.replicas("llama3-8b")) == [
        ("b", "serving"), ("c", "serving"), ("a", "draining")]
    # Before any decision every endpoint serves.
    eps["mixtral"] += ["m0"]
    assert phases(await act.replicas("mixtral")) == [("m0", "serving")]


async def test_start_and_close_run_the_staleness_check(scaler: Scaler) -> None:
    await scaler.actuator.start()
    await scaler.actuator.close()
    assert not scaler.actuator.server.serving
    with pytest.raises(ValueError, match="negative"):
        await scaler.decide(-1)
