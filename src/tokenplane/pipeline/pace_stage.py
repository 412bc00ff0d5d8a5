"""Callers who keep sending what is refused are refused sooner.

* :class:`PaceStage` (right after auth): a caller known to be past a request rate, or
  a key that spent its pace of bytes refused for their size, gets its 429 before its
  body is parsed or counted (``SideAdmission.precheck``).
* :class:`SizeRefusalFinisher`: a request refused for its size before admission
  (``context_length_exceeded``) still counts one request against the caller's rates
  and its body's bytes against the key's pace (``SideAdmission.count_refusal``), so a
  stream of oversized prompts cannot go on for free.
"""

from __future__ import annotations

from tokenplane.admission.gateway.side_calls import SideAdmission
from tokenplane.pipeline.context import RequestContext

SIZE_REFUSALS = frozenset({"context_length_exceeded"})


class PaceStage:
    def __init__(self, side: SideAdmission) -> None:
        self.side = side

    async def run(self, ctx: RequestContext) -> None:
        if ctx.principal is not None:
            self.side.precheck(ctx.principal)


class SizeRefusalFinisher:
    def __init__(self, side: SideAdmission) -> None:
        self.side = side

    async def finish(self, ctx: RequestContext) -> None:
        if ctx.error_code not in SIZE_REFUSALS or ctx.principal is None \
                or ctx.ticket is not None or ctx.upstream_start is not None:
            return
        await self.side.count_refusal(ctx.principal, ctx.alias, ctx.request_id,
                                      len(ctx.raw))
