"""The Advice page's builder over a document of many findings (a busy ledger's every
tenant): the biggest savings first, 50 to a page, the count and totals of the whole
document, the document's age; the admin route answered by a stand-in."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tokenplane.console.admin_client import AdminAnswer
from tokenplane.console.page import Page, PageError
from tokenplane.console.pages.advice import PAGE_SIZE, build


class StandIn:
    """What the builder uses of a ``Page``: its arguments and the admin route."""

    def __init__(self, doc: dict[str, Any], status: int = 200, **args: str) -> None:
        self.doc = doc
        self.status = status
        self.args = args
        self.asked: list[dict[str, str]] = []

    def tenant(self) -> str | None:
        return None

    def arg(self, name: str) -> str | None:
        return self.args.get(name)

    async def admin_api(self, path: str, query: dict[str, str] | None = None) -> AdminAnswer:
        assert path == "/admin/v1/advice"
        self.asked.append(query or {})
        return AdminAnswer(self.status, self.doc)


def _doc(n: int) -> dict[str, Any]:
    findings = [{"kind": "verbose_outputs", "title": f"f{i}",
                 "saving": {"cost_micros_per_month": (i * 7919) % 1000,
                            "tokens_per_month": i}} for i in range(n)]
    return {"findings": findings, "total": {"findings": n, "cost_per_month": "1.5"},
            "currency": "USD", "window_days": 30.0, "age_s": 42.5, "refreshing": True,
            "not_evaluated": {}}


async def _build(doc: dict[str, Any], **args: str) -> dict[str, Any]:
    return await build(cast(Page, StandIn(doc, **args)))


async def test_fifty_findings_a_page_the_biggest_savings_first() -> None:
    doc = _doc(120)
    ranked = sorted(doc["findings"], key=lambda f: (-f["saving"]["cost_micros_per_month"],
                                                    -f["saving"]["tokens_per_month"]))
    first = await _build(doc)
    assert first["count"] == 120 and first["pages"] == 3 and first["page"] == 1
    assert first["findings"] == ranked[:PAGE_SIZE] and (first["first"], first["last"]) == (1, 50)
    last = await _build(doc, page="3")
    assert last["findings"] == ranked[100:] and (last["first"], last["last"]) == (101, 120)
    beyond = await _build(doc, page="9")  # past the end: the last page
    assert beyond["page"] == 3 and beyond["findings"] == ranked[100:]
    assert first["age_s"] == 42.5 and first["refreshing"] is True
    assert first["total"] == {"findings": 120, "cost_per_month": "1.5"}


async def test_no_findings_is_one_empty_page() -> None:
    data = await _build(_doc(0))
    assert data["findings"] == [] and data["pages"] == 1 and data["first"] == 0


@pytest.mark.parametrize("bad", ["0", "x", "-2", "1.5"])
async def test_a_bad_page_number_is_400(bad: str) -> None:
    with pytest.raises(PageError) as err:
        await _build(_doc(3), page=bad)
    assert err.value.status == 400


async def test_a_document_being_computed_is_not_waited_for() -> None:
    stand_in = StandIn({"object": "advice.pending", "computing_s": 1.5}, status=202)
    data = await build(cast(Page, stand_in))
    assert data == {"available": True, "pending": True, "computing_s": 1.5}
    assert stand_in.asked[0]["wait"] == "false"
