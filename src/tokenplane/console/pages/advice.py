"""Advice: the optimisation advisor's findings (``/admin/v1/advice``, where the
gateway has it), each with its evidence, saving and what to do; the biggest savings
first, ``PAGE_SIZE`` to a page (every tenant's advice on a busy ledger runs to
thousands), with the document's age (the gateway keeps advice documents and
refreshes them behind the answer). A document not computed yet (a first start, a new
window) is not waited for: the page says it is being computed and reloads itself."""

from __future__ import annotations

from typing import Any

from tokenplane.console.page import Data, Page, PageError
from tokenplane.timefmt import utc_minute

PAGE_SIZE = 50


def _saving(f: dict[str, Any]) -> tuple[int, int]:
    s = f.get("saving") or {}
    return -int(s.get("cost_micros_per_month") or 0), -int(s.get("tokens_per_month") or 0)


async def build(page: Page) -> Data:
    tenant = page.tenant()
    since = page.arg("since") or "30d"
    number = page.arg("page") or "1"
    if not number.isdigit() or int(number) < 1:
        raise PageError(400, "error.bad_input")
    # never wait for a computation: the gateway keeps the documents (docs/ADVICE.md)
    answer = await page.admin_api("/admin/v1/advice", {"tenant": tenant or "",
                                                       "since": since, "wait": "false"})
    if answer.status == 404 and answer.data.get("message") == "not available":
        return {"available": False, "pending": False}
    if answer.status == 202:  # being computed: the page says so and reloads itself
        return {"available": True, "pending": True,
                "computing_s": answer.data.get("computing_s", 0)}
    if answer.status == 400:
        raise PageError(400, "error.bad_input")
    if not answer.ok:
        raise PageError(answer.status, "error.unavailable")
    doc: dict[str, Any] = answer.data if isinstance(answer.data, dict) else {}
    findings = [f for f in doc.get("findings") or [] if isinstance(f, dict)]
    findings.sort(key=_saving)
    pages = max(1, -(-len(findings) // PAGE_SIZE))
    current = min(int(number), pages)
    first = (current - 1) * PAGE_SIZE
    return {"available": True, "pending": False, "findings": findings[first:first + PAGE_SIZE],
            "count": len(findings), "first": first + 1 if findings else 0,
            "last": min(first + PAGE_SIZE, len(findings)), "page": current, "pages": pages,
            "tenant": tenant or "", "total": doc.get("total") or {},
            "currency": doc.get("currency", ""), "since": since,
            "window_days": doc.get("window_days"), "age_s": doc.get("age_s"),
            "refreshing": bool(doc.get("refreshing")),
            "not_evaluated": doc.get("not_evaluated") or {},
            "coverage": _coverage(doc.get("coverage"))}


def _coverage(cov: Any) -> dict[str, Any] | None:
    """The document's coverage (None in a document kept from before it had one), with
    the day a short group has enough data written out."""
    if not isinstance(cov, dict):
        return None
    out: dict[str, Any] = cov
    short = out.get("short")
    if isinstance(short, dict) and isinstance(short.get("enough_at"), int | float):
        out = {**out, "short": {**short, "enough_at_text": utc_minute(short["enough_at"])}}
    return out
