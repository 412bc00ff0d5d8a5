"""A single-engine virtual-time runner: arrivals in, per-request latencies out.

The clock jumps from step to step (and to the next arrival when the engine is
idle), so an hour of traffic runs in seconds. Tokens emitted by a step are
delivered at the step's end. The whole-cluster simulator lives elsewhere; this is
the small runner the engine's own tests and benchmarks use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tokenplane.engine.core import Engine, EngineRequest, FinishedRequest


@dataclass
class RequestTiming:
    request_id: str
    arrival: float
    first_token: float
    finish: float
    output_tokens: int
    cached_tokens: int
    preemptions: int

    @property
    def ttft(self) -> float:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> float:
        return self.finish - self.arrival

    @property
    def tpot(self) -> float:
        """Mean time per output token after the first (0 for one-token outputs)."""
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish - self.first_token) / (self.output_tokens - 1)


@dataclass
class VirtualRun:
    timings: dict[str, RequestTiming]
    steps: int
    batched_tokens: int
    end_time: float
    max_running: int


def run_virtual(
    engine: Engine, arrivals: Iterable[tuple[float, EngineRequest]], *, max_steps: int = 10**8
) -> VirtualRun:
    """Feed (arrival time, request) pairs to the engine and run until all finish."""
    pending = sorted(arrivals, key=lambda item: item[0])
    arrived: dict[str, float] = {}
    first: dict[str, float] = {}
    timings: dict[str, RequestTiming] = {}
    t = pending[0][0] if pending else 0.0
    idx = 0
    steps = 0
    batched = 0
    max_running = 0
    while idx < len(pending) or engine.has_work():
        while idx < len(pending) and pending[idx][0] <= t:
            at, req = pending[idx]
            engine.add(req, at)
            arrived[req.request_id] = at
            idx += 1
        if not engine.has_work():
            t = pending[idx][0]
            continue
        if steps >= max_steps:
            raise RuntimeError(f"engine did not finish within {max_steps} steps")
        res = engine.step(t)
        steps += 1
        batched += res.num_batched_tokens
        running = engine.num_running + len(res.finished)
        if running > max_running:
            max_running = running
        t = res.start + res.duration
        for rid in res.emitted:
            first.setdefault(rid, t)
        for fin in res.finished:
            timings[fin.request_id] = _timing(fin, arrived[fin.request_id], first, t)
    return VirtualRun(timings, steps, batched, t, max_running)


def _timing(
    fin: FinishedRequest, arrival: float, first: dict[str, float], t: float
) -> RequestTiming:
    return RequestTiming(
        request_id=fin.request_id,
        arrival=arrival,
        first_token=first.pop(fin.request_id, t),
        finish=t,
        output_tokens=fin.output_tokens,
        cached_tokens=fin.cached_tokens,
        preemptions=fin.preemptions,
    )
