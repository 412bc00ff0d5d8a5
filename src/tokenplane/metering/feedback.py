"""Feedback scores in the ledger database (``feedback``, migration 10): one row per
(tenant, request), written by ``POST /v1/feedback`` (a later score replaces it), read
as sums per (tenant, app, alias) by the advisor's right-sizing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tokenplane.metering.stores.base import LedgerSink


@dataclass(frozen=True, slots=True)
class FeedbackRecord:
    tenant: str
    request_id: str
    app: str
    model: str
    version: str
    key_id: str
    score: float
    comment: str | None
    labels: tuple[str, ...]
    request_ts: float
    created_at: float


_UPSERT = (
    "INSERT INTO feedback (tenant, request_id, app, model, version, key_id, score, comment, "
    "labels, request_ts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant, request_id) DO UPDATE SET key_id = excluded.key_id, "
    "score = excluded.score, comment = excluded.comment, labels = excluded.labels, "
    "created_at = excluded.created_at"
)


async def request_of(sink: LedgerSink, request_id: str) -> dict[str, Any] | None:
    """The request's last attempt in the ledger (tenant, app, alias, version, time)."""
    rows = await sink.fetch(
        "SELECT tenant, app, model, model_version, ts FROM usage_events "
        "WHERE request_id = ? ORDER BY attempt DESC LIMIT 1", [request_id])
    return rows[0] if rows else None


async def record_feedback(sink: LedgerSink, rec: FeedbackRecord) -> None:
    await sink.execute(_UPSERT, [
        rec.tenant, rec.request_id, rec.app, rec.model, rec.version, rec.key_id, rec.score,
        rec.comment, orjson.dumps(list(rec.labels)).decode(), rec.request_ts,
        rec.created_at])


async def feedback_sums(sink: LedgerSink, since: float | None, until: float | None,
                        tenant: str | None) -> list[dict[str, Any]]:
    """Count and sum of scores per (tenant, app, alias) of requests in [since, until)."""
    clauses: list[str] = ["1 = 1"]
    params: list[Any] = []
    if since is not None:
        clauses.append("request_ts >= ?")
        params.append(since)
    if until is not None:
        clauses.append("request_ts < ?")
        params.append(until)
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    return await sink.fetch(
        "SELECT tenant, app, model, COUNT(*) AS n, SUM(score) AS total FROM feedback "
        f"WHERE {' AND '.join(clauses)} GROUP BY tenant, app, model "
        "ORDER BY tenant, app, model", params)
