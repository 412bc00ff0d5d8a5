"""Audit: search the audit log by time, app, key and verdict within the signed-in
scope (the admin API's ``/admin/v1/audit``), and the chain's status."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError

VERDICTS = ("allow", "flag", "block")
FIELDS = ("since", "until", "key_id", "verdict", "limit")


async def build(page: Page) -> Data:
    tenant = page.tenant()
    query = {f: page.arg(f) or "" for f in FIELDS}
    query["since"] = query["since"] or "24h"
    query["limit"] = query["limit"] or str(min(page.parts.config.max_rows, 1000))
    if query["verdict"] and query["verdict"] not in VERDICTS:
        raise PageError(400, "error.bad_input")
    app = page.arg("app")
    answer = await page.admin_api("/admin/v1/audit", {**query, "tenant": tenant or ""})
    if answer.status == 400:
        raise PageError(400, "error.bad_input")
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    records: list[dict[str, Any]] = [
        r for r in answer.data["data"] if app is None or r.get("app") == app]
    return {"records": records, "has_more": answer.data.get("has_more", False),
            "query": {**query, "app": app or "", "tenant": tenant or ""},
            "verdicts": VERDICTS}
