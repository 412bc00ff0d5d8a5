"""The access log finisher: one JSON line per request of the inference routes.

Fields: ``time`` (the arrival, ISO 8601 UTC with milliseconds), ``request_id``, ``method``,
``path``, ``status`` (HTTP; 499 for a client that left), ``outcome`` (``ok``,
``error``, ``cancelled``), ``error_code``, ``tenant``, ``department``, ``app``,
``key_id`` (the key's id, never the key), ``model`` (the alias asked for),
``backend``, ``stream``, ``prompt_tokens``, ``completion_tokens`` (as billed),
``attempts``, ``duration_ms`` and ``ttft_ms`` (time to first token of a stream; null
for a non-stream answer or when no token came). Runs last, after the meter settled
the counts; it only encodes the line and queues it (``observe/access_log.py`` writes
it from a thread).
"""

from __future__ import annotations

import time

import orjson

from tokenplane.observe.access_log import AccessLog
from tokenplane.pipeline.context import RequestContext


def _ms(start: float, end: float | None) -> float | None:
    """Milliseconds to one decimal (``round`` costs several times more)."""
    return None if end is None else int((end - start) * 10_000) / 10


class AccessLogFinisher:
    def __init__(self, log: AccessLog) -> None:
        self.log = log

    async def finish(self, ctx: RequestContext) -> None:
        if not self.log.wants(ctx.status == "ok"):
            return
        p = ctx.principal
        counts = ctx.final[1] if ctx.final is not None else ctx.counts
        arrival = ctx.arrival
        record = {
            "time": self.log.stamp(arrival),
            "request_id": ctx.request_id,
            "method": "POST",
            "path": ctx.path,
            "status": ctx.http_status,
            "outcome": ctx.status,
            "error_code": ctx.error_code,
            "tenant": p.tenant if p else None,
            "department": p.department if p else None,
            "app": p.app if p else None,
            "key_id": p.key_id if p else None,
            "model": ctx.alias,
            "backend": ctx.endpoint.id if ctx.endpoint else None,
            "stream": ctx.stream,
            "prompt_tokens": counts.prompt,
            "completion_tokens": counts.output,
            "attempts": ctx.attempt + 1,
            "duration_ms": _ms(arrival, time.time()),
            "ttft_ms": _ms(arrival, ctx.first_token),
        }
        self.log.add(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
