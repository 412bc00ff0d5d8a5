"""Sessions: agent sessions and one session's waterfall of steps (the admin API's
``/admin/v1/sessions``, where the gateway has it)."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError


def _steps(session: dict[str, Any]) -> list[dict[str, Any]]:
    """The waterfall: each step's start and length relative to the session's start."""
    steps = session.get("steps") or []
    starts = [s.get("start_ts") or s.get("arrival_ts") or s.get("ts") for s in steps]
    t0 = min((t for t in starts if t is not None), default=None)
    out = []
    for s, start in zip(steps, starts, strict=True):
        end = s.get("end_ts") or s.get("ts") or start
        out.append({**s, "offset_s": round(start - t0, 3) if start and t0 else 0.0,
                    "duration_s": round(max(0.0, end - start), 3) if start and end else 0.0})
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
