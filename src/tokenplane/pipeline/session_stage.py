"""The session stage: which agent session and step a request is (headers or
``metadata``), its budget's rules for admission, and the tool-output policy
(docs/SESSIONS.md). It runs after validation and before the prompt is counted, so
the counts, the admission reservation and the ledger all see what is sent upstream.

A request with tool results is measured (and the policy applied) whether or not it
names a session, when its settings set a threshold; a request with neither a
session nor thresholds costs one header lookup and one dictionary lookup.
"""

from __future__ import annotations

from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.context import RequestContext
from tokenplane.sessions.budget import session_rules
from tokenplane.sessions.gateway.steps import StepCounter
from tokenplane.sessions.ids import SESSION_HEADER, STEP_HEADER, session_ref, strip_metadata
from tokenplane.sessions.settings import SessionSettingsBook
from tokenplane.sessions.step import SessionStep
from tokenplane.sessions.tool_links import message_digests
from tokenplane.sessions.tool_output import CutCache, apply_policy
from tokenplane.tokens.model_counters import ModelCounters

TOOL_OUTPUT_HEADER = "x-tokenplane-tool-output"


class SessionStage:
    def __init__(self, book: SessionSettingsBook, steps: StepCounter, counters: ModelCounters,
                 metrics: GatewayMetrics) -> None:
        self.book = book
        self.steps = steps
        self.counters = counters
        self.metrics = metrics
        self.cuts = CutCache()  # each earlier result is cut once, not at every step

    async def run(self, ctx: RequestContext) -> None:
        p, model = ctx.principal, ctx.model
        if p is None or model is None:
            return
        ref = session_ref(ctx.headers, ctx.body)
        settings = self.book.for_app(p.tenant, p.app)
        tool = settings.tool_output
        step: SessionStep | None = None
        if ref is not None:
            strip_metadata(ctx.body)
            number = await self.steps.next_step(p.tenant, ref.session_id, ref.step,
                                                settings.window_s)
            step = SessionStep(ref.session_id, number,
                               session_rules(settings.budget, settings.window_s))
            ctx.session = step
            ctx.response_headers[SESSION_HEADER] = ref.session_id
            ctx.response_headers[STEP_HEADER] = str(number)
        measure = step is not None or tool.max_result_tokens is not None \
            or tool.max_growth_tokens is not None
        messages = ctx.body.get("messages")
        if not measure or not isinstance(messages, list) or not ctx.operation.generates:
            return
        if step is not None:
            step.tool_results = message_digests(messages)
        tokenizer = self.counters.tokenizer(model.alias)
        out = apply_policy(messages, tool, tokenizer,
                           lambda text: self.counters.count_text(model, text), self.cuts)
        if out.messages is not messages:
            ctx.body["messages"] = out.messages
        if step is not None:
            step.tool_output_tokens = out.tool_tokens
            step.tool_output_added = out.added_tokens
            step.tool_output_removed = out.removed_tokens
        if out.flags:
            ctx.flags.extend(f for f in out.flags if f not in ctx.flags)
            ctx.response_headers[TOOL_OUTPUT_HEADER] = ",".join(out.flags)
            for flag in out.flags:
                self.metrics.session_tool_output.labels(flag, p.tenant).inc()
        if out.removed_tokens:
            self.metrics.session_tool_output_removed.labels(p.tenant).inc(out.removed_tokens)
