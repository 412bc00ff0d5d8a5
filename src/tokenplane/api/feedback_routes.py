"""``POST /v1/feedback``: a score for one answer, stored in the ledger database.

Body: ``request_id`` (the answer's ``x-request-id``), ``score`` (0 to 1: 1 is good; a
thumbs up is 1 and down 0, five stars map to (n - 1) / 4), optional ``comment`` and
``labels``. The request must be in the ledger and belong to the key's tenant (an admin
key may score any); an answer's usage reaches the ledger a moment after the answer,
so a request not found yet is looked for again for up to ``wait_s`` before a 404. A
request scored again keeps the newest score. The advisor's right-sizing compares the
scores per app and alias (docs/ADVICE.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import authenticate
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.feedback import FeedbackRecord, record_feedback, request_of
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.operations import validate as v
from tokenplane.operations.fields import Arr, Num, Obj, Str

PATH = "/v1/feedback"
MAX_COMMENT = 4000


def body_spec() -> Obj:
    return Obj({
        "request_id": Str(min_len=1, max_len=256,
                          description="the answer's x-request-id header"),
        "score": Num(0, 1, description="1 is good, 0 bad (thumbs: 1 / 0; n stars of 5: "
                     "(n - 1) / 4)"),
        "comment": Str(max_len=MAX_COMMENT),
        "labels": Arr(Str(min_len=1, max_len=64), max_items=20),
    }, ("request_id", "score"), extra=False)


def not_found(request_id: str) -> GatewayError:
    return GatewayError(404, f"No request '{request_id}' of your tenant is in the ledger "
                        "(usage arrives a moment after the answer; retry shortly).",
                        param="request_id", code="request_not_found",
                        type_="invalid_request_error")


class FeedbackRoutes:
    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time, wait_s: float = 3.0) -> None:
        self.keys = keys
        self.sink = sink
        self.clock = clock
        self.wait_s = wait_s
        self.spec = body_spec()

    def install(self, app: web.Application) -> None:
        app.router.add_post(PATH, self.feedback)

    async def _find(self, request_id: str) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        delay = 0.05
        while True:
            row = await request_of(self.sink(), request_id)
            if row is not None or loop.time() >= deadline:
                return row
            await asyncio.sleep(delay)  # the meter flushes its journal every 250 ms
            delay = min(delay * 2, 0.4)

    async def feedback(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        v.check_content_type(request.headers.get("content-type"))
        body = v.parse_json_object(await request.read())
        self.spec.check(body)
        rid = body["request_id"]
        row = await self._find(rid)
        if row is None or (not principal.admin and row["tenant"] != principal.tenant):
            raise not_found(rid)  # another tenant's request looks absent: nothing leaks
        rec = FeedbackRecord(
            tenant=row["tenant"], request_id=rid, app=row["app"], model=row["model"],
            version=row["model_version"] or "", key_id=principal.key_id,
            score=float(body["score"]), comment=body.get("comment"),
            labels=tuple(body.get("labels") or ()), request_ts=float(row["ts"]),
            created_at=self.clock())
        await record_feedback(self.sink(), rec)
        out = {"object": "feedback", "request_id": rid, "score": rec.score,
               "comment": rec.comment, "labels": list(rec.labels), "model": rec.model,
               "app": rec.app, "created_at": rec.created_at}
        return web.Response(body=orjson.dumps(out), content_type="application/json")
