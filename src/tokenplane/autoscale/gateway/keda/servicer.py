"""KEDA's ``externalscaler.ExternalScaler`` service over the :class:`DesiredBoard`.

A ScaledObject's ``external`` trigger names the pool in its metadata (``pool:
<alias>``) and optionally which count scales its target (``count: serving`` by
default, ``warm`` or ``total``). The one metric's target is 1 per replica and its
value the desired count, so the HPA's ``ceil(value / target)`` is the desired count;
``IsActive`` is ``count > 0`` (KEDA scales from and to zero on it).

Before the pool's first decision, and once its last decision is older than
``stale_after_s`` (the process that decided no longer leads, or its controller
stopped), the answer is UNAVAILABLE: KEDA counts the scaler as failing and, after
the ScaledObject's ``fallback.failureThreshold``, holds ``fallback.replicas``
instead of acting on an old figure."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping

import grpc

from tokenplane.autoscale.gateway.keda.board import (
    COUNT_KINDS,
    CountKind,
    DesiredBoard,
    UnknownPool,
)
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2 as pb
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc

_NOT_NAME = re.compile(r"[^a-z0-9]+")


def metric_name(pool: str, kind: CountKind) -> str:
    """``tokenplane-<pool>-<kind>-replicas``, lower case, dashes for anything else
    (KEDA prefixes it with the trigger's index for the HPA)."""
    return f"tokenplane-{_NOT_NAME.sub('-', pool.lower()).strip('-')}-{kind}-replicas"


class BadScaledObject(ValueError):
    """The trigger's metadata cannot be served (missing pool, unknown count)."""


def trigger_of(metadata: Mapping[str, str]) -> tuple[str, CountKind]:
    """(pool, count kind) from a ScaledObject trigger's metadata."""
    pool = metadata.get("pool", "").strip()
    if not pool:
        raise BadScaledObject("the trigger's metadata has no 'pool' (a model alias)")
    kind = metadata.get("count", "serving").strip() or "serving"
    if kind not in COUNT_KINDS:
        raise BadScaledObject(
            f"metadata 'count' is {kind!r}; it must be one of {', '.join(COUNT_KINDS)}"
        )
    return pool, kind


class ExternalScaler(pb_grpc.ExternalScalerServicer):
    """Answers KEDA from the board; a bad trigger is INVALID_ARGUMENT, a pool the
    gateway does not scale through KEDA NOT_FOUND, no fresh decision UNAVAILABLE."""

    def __init__(self, board: DesiredBoard, stale_after_s: float) -> None:
        self._board = board
        self._stale_after_s = stale_after_s

    async def _count(
        self, ref: pb.ScaledObjectRef, context: grpc.aio.ServicerContext[object, object]
    ) -> tuple[str, CountKind, int]:
        try:
            pool, kind = trigger_of(ref.scalerMetadata)
        except BadScaledObject as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _about(ref, str(exc)))
        try:
            desired = self._board.get(pool)
        except UnknownPool:
            # the pools this gateway scales are not named: any caller of the port
            # would learn them (docs/KEDA.md: which names the gateway's config holds)
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                _about(ref, f"pool {pool!r} is not scaled through KEDA by this gateway"),
            )
        age = self._board.age(pool)
        if desired is None or age is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE,
                                _about(ref, f"pool {pool!r} has no decision yet"))
        if age > self._stale_after_s:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                _about(ref, f"pool {pool!r} was last decided {age:.0f} s ago (over "
                       f"{self._stale_after_s:.0f} s): this process no longer decides"),
            )
        return pool, kind, desired.of(kind)

    async def IsActive(  # the proto names the methods
        self, request: pb.ScaledObjectRef, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.IsActiveResponse:
        _, _, count = await self._count(request, context)
        return pb.IsActiveResponse(result=count > 0)

    async def StreamIsActive(
        self, request: pb.ScaledObjectRef, context: grpc.aio.ServicerContext[object, object]
    ) -> AsyncIterator[pb.IsActiveResponse]:
        """The current activity at once, then each time it flips (KEDA keeps the
        stream open and reacts without waiting for its polling interval)."""
        version = self._board.version
        _, _, count = await self._count(request, context)
        active = count > 0
        yield pb.IsActiveResponse(result=active)
        while True:
            version = await self._board.wait_changed(version)
            _, _, count = await self._count(request, context)
            if (count > 0) != active:
                active = count > 0
                yield pb.IsActiveResponse(result=active)

    async def GetMetricSpec(
        self, request: pb.ScaledObjectRef, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.GetMetricSpecResponse:
        pool, kind, _ = await self._count(request, context)
        spec = pb.MetricSpec(metricName=metric_name(pool, kind), targetSize=1, targetSizeFloat=1.0)
        return pb.GetMetricSpecResponse(metricSpecs=[spec])

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.GetMetricsResponse:
        pool, kind, count = await self._count(request.scaledObjectRef, context)
        value = pb.MetricValue(
            metricName=metric_name(pool, kind), metricValue=count, metricValueFloat=float(count)
        )
        return pb.GetMetricsResponse(metricValues=[value])


def _about(ref: pb.ScaledObjectRef, message: str) -> str:
    return f"ScaledObject {ref.namespace or '?'}/{ref.name or '?'}: {message}"
