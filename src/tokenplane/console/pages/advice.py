"""Advice: the optimisation advisor's findings (``/admin/v1/advice``, where the
gateway has it), each with its evidence, saving and what to do."""

from __future__ import annotations

from tokenplane.console.page import Data, Page, PageError


async def build(page: Page) -> Data:
    tenant = page.tenant()
    answer = await page.admin_api("/admin/v1/advice", {
        "tenant": tenant or "", "since": page.arg("since") or "30d"})
    if answer.status == 404 and answer.data.get("message") == "not available":
        return {"available": False}
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    data = answer.data
    findings = data.get("data", data.get("findings", [])) if isinstance(data, dict) else data
    return {"available": True, "findings": findings}
