"""Audit: search the audit log by time, app, key and verdict within the signed-in
scope (the admin API's ``/admin/v1/audit``, which reads the newest records from the
end of the log), a page at a time (newest first; "older" continues before the oldest
record shown), and the chain's status."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from tokenplane.console.page import Data, Page, PageError
from tokenplane.metering.outcomes import OUTCOMES, outcome_of

VERDICTS = ("allow", "flag", "block", "unscreened")
SHOWN_OUTCOMES = ("ok", *OUTCOMES)
FIELDS = ("since", "until", "key_id", "app", "verdict", "limit")


async def build(page: Page) -> Data:
    tenant = page.tenant()
    query = {f: page.arg(f) or "" for f in FIELDS}
    query["since"] = query["since"] or "24h"
    query["limit"] = query["limit"] or str(min(page.parts.config.max_rows, 1000))
    if query["verdict"] and query["verdict"] not in VERDICTS:
        raise PageError(400, "error.bad_input")
    # requests and admin actions (kind admin: who changed which key, limit or budget)
    answer = await page.admin_api("/admin/v1/audit",
                                  {**query, "tenant": tenant or "", "kind": "all"})
    if answer.status == 400:
        raise PageError(400, "error.bad_input")
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    records: list[dict[str, Any]] = [
        {**r, "outcome": outcome(r)} for r in answer.data["data"]]
    more = bool(answer.data.get("has_more", False))
    return {"records": records, "has_more": more,
            "query": {**query, "tenant": tenant or ""},
            "older": _older(query, tenant, records) if more else None,
            "verdicts": VERDICTS}


def outcome(record: dict[str, Any]) -> str:
    """What happened to the request (the verdict says what governance decided): one of
    ``SHOWN_OUTCOMES``, from its HTTP status (a 429 of a request that reached no
    backend is a limit's refusal)."""
    status = record.get("status")
    if not isinstance(status, int):
        return "failures"
    code = "ok" if status < 400 else "cancelled" if status == 499 else "error"
    return outcome_of(code, status, record.get("backend") is not None) or "ok"


def _older(query: dict[str, str], tenant: str | None, records: list[dict[str, Any]]
           ) -> str:
    """The next page: the same search, before the oldest record shown."""
    args = {k: v for k, v in query.items() if v}
    args["until"] = repr(float(records[-1]["ts"]))
    if tenant:
        args["tenant"] = tenant
    return "/console/audit?" + urlencode(args)
