"""What KEDA sees of the scaler: the round trip of GetMetrics and IsActive over gRPC
on loopback, and how long a decision takes to reach an open StreamIsActive stream
(the push ``type: external-push`` relies on), with the gateway's grpc.aio server and a
grpc.aio client on one loop in one process (so an upper bound of the server's own
cost plus the client's).

    python bench/bench_keda_scaler.py [--n 2000] [--out bench/out/keda_scaler.json]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import grpc
import orjson

from tokenplane.autoscale.gateway.keda.actuator import KedaActuator
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2 as pb
from tokenplane.autoscale.gateway.keda.proto import externalscaler_pb2_grpc as pb_grpc


def _us(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_us": round(statistics.median(s) * 1e6, 1),
            "p99_us": round(s[int(len(s) * 0.99) - 1] * 1e6, 1)}


async def run(n: int) -> dict[str, Any]:
    act = KedaActuator("127.0.0.1:0", ["llama3-8b"], lambda p: [], interval_s=10.0)
    await act.scale_to("llama3-8b", 0, 0)
    ref = pb.ScaledObjectRef(name="engine", namespace="bench",
                             scalerMetadata={"pool": "llama3-8b"})
    req = pb.GetMetricsRequest(scaledObjectRef=ref,
                               metricName="tokenplane-llama3-8b-serving-replicas")
    out: dict[str, Any] = {"n": n}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{act.server.port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        await stub.GetMetrics(req)  # connect
        for name, call in (("get_metrics", lambda: stub.GetMetrics(req)),
                           ("is_active", lambda: stub.IsActive(ref))):
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                await call()
                times.append(time.perf_counter() - t0)
            out[name] = _us(times)
        stream = stub.StreamIsActive(ref)
        assert (await stream.read()).result is False
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            await act.scale_to("llama3-8b", (i + 1) % 2, 0)  # flips every time
            got = await stream.read()
            times.append(time.perf_counter() - t0)
            assert got.result is bool((i + 1) % 2)
        out["decision_to_stream_push"] = _us(times)
        stream.cancel()
    await act.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    result = asyncio.run(run(args.n))
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
