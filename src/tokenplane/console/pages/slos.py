"""SLOs: each SLO's SLIs, error budget left, burn rates and alerts (the admin API's
``/admin/v1/slos`` for the signed-in key)."""

from __future__ import annotations

from tokenplane.console.page import Data, Page, PageError


async def build(page: Page) -> Data:
    tenant = page.tenant()
    answer = await page.admin_api("/admin/v1/slos", {"tenant": tenant or ""})
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    return {"slos": answer.data["data"], "evaluated_at": answer.data.get("evaluated_at"),
            "guards": answer.data.get("canary_guards", [])}
