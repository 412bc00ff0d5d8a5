"""Tools: the MCP gateway's tool calls by tool and app (the admin API's
``/admin/v1/tools``, read from the audit log): calls, denials, failures, truncations,
result tokens and latency."""

from __future__ import annotations

from tokenplane.console.page import Data, Page, PageError


async def build(page: Page) -> Data:
    tenant = page.tenant()
    since = page.arg("since") or "24h"
    answer = await page.admin_api("/admin/v1/tools", {"tenant": tenant or "",
                                                      "since": since})
    if answer.status == 400:
        raise PageError(400, "error.bad_input")
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    rows = answer.data["data"]
    return {"rows": rows, "since": since, "tenant": tenant or "",
            "configured": page.parts.mcp_configured,
            "max_tokens": max((r["result_tokens"] for r in rows), default=0)}
