"""Sessions: agent sessions and one session's waterfall of steps (the admin API's
``/admin/v1/sessions``, where the gateway has it)."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError
from tokenplane.console.queries import SOURCES


def _steps(session: dict[str, Any]) -> list[dict[str, Any]]:
    """The waterfall's rows: each step's prompt by source and its output, in order."""
    out = []
    for i, st in enumerate(session.get("steps") or []):
        row = dict(st)
        row["label"] = f"{st.get('step') if st.get('step') is not None else i + 1}"
        for k in (*SOURCES, "output_tokens", "cached", "tool_calls"):
            row[k] = int(st.get(k) or 0)
        out.append(row)
    return out


async def build(page: Page) -> Data:
    tenant = page.tenant()
    sid = page.arg("id")
    if sid is not None:
        one = await page.admin_api(f"/admin/v1/sessions/{sid}", {"tenant": tenant or ""})
        if one.status == 404 and one.data.get("code") != "session_not_found":
            return {"available": False}
        if not one.ok:
            raise PageError(one.status if one.status in (400, 403, 404) else 502,
                            "error.not_found" if one.status == 404 else "error.unavailable")
        return {"available": True, "session": one.data, "steps": _steps(one.data)}
    listed = await page.admin_api("/admin/v1/sessions", {
        "tenant": tenant or "", "since": page.arg("since") or "7d",
        "order": page.arg("order") or "cost"})
    if listed.status == 404:
        return {"available": False}
    if not listed.ok:
        raise PageError(listed.status, "error.unavailable")
    return {"available": True, "sessions": listed.data["data"]}
