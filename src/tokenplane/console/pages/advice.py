"""Advice: the optimisation advisor's findings (``/admin/v1/advice``, where the
gateway has it), each with its evidence, saving per month and what to do."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError


async def build(page: Page) -> Data:
    tenant = page.tenant()
    since = page.arg("since") or "30d"
    answer = await page.admin_api("/admin/v1/advice", {"tenant": tenant or "",
                                                       "since": since})
    if answer.status == 404 and answer.data.get("message") == "not available":
        return {"available": False}
    if answer.status == 400:
        raise PageError(400, "error.bad_input")
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    doc: dict[str, Any] = answer.data if isinstance(answer.data, dict) else {}
    findings = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    findings.sort(key=lambda f: (-int((f.get("saving") or {}).get("cost_micros_per_month") or 0),
                                 -int((f.get("saving") or {}).get("tokens_per_month") or 0)))
    return {"available": True, "findings": findings, "total": doc.get("total") or {},
            "currency": doc.get("currency", ""), "since": since,
            "window_days": doc.get("window_days"),
            "not_evaluated": doc.get("not_evaluated") or {}}
