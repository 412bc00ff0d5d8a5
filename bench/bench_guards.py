"""Gateway guard overhead per request: the input guard, the output guard and the
audit record, measured on the stage objects the pipeline runs.

Baseline in the same run: the TokensStage counting the same request (work every
request already pays). Each request is made unique (a counter in the user turn) so
no cache hides the cost. Body: a ~2 KB chat (system prompt, two earlier turns, a new
user turn; mixed Chinese and English, 4 PII values).

Run: python bench/bench_guards.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from tokenplane.auth.principal import Principal
from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.config.schema import GatewayConfig
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.service import AuditService, audit_redactor
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.audit_stage import AuditFinisher
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.guard_stages import InputGuardStage
from tokenplane.pipeline.output_guard import StreamRewrite, guard_body
from tokenplane.pipeline.stages import TokensStage
from tokenplane.tokens.model_counters import ModelCounters

SYSTEM = ("You are a helpful assistant for an insurance company. 请用中文或英文回答客户的问题，"
          "不要透露内部流程。Answer briefly and cite the policy section. ") * 4
TURN = ("客户张先生的保单需要更新地址，联系电话13812345678，邮箱zhang.san@example.com。"
        "Please check the claim history and summarise the open items. ") * 2
USER = ("Customer ID 11010519491231002X asks whether card 6222021234567890128 can be used "
        "for the premium. 请确认并给出步骤。 ") * 2


def body(i: int) -> dict[str, Any]:
    return {"model": "m", "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TURN}, {"role": "assistant", "content": "OK. " + TURN},
        {"role": "user", "content": f"{USER} (request {i})"}]}


def ctx_for(i: int) -> RequestContext:
    ctx = RequestContext(f"r{i}", "/v1/chat/completions", CHAT, b"", {})
    ctx.principal = Principal("key_1", "acme", app="chat")
    ctx.body = body(i)
    ctx.alias = "m"
    return ctx


def p50_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


async def timed(n: int, fn: Callable[[int], Awaitable[None]]) -> float:
    out = []
    for i in range(n):
        t = time.perf_counter()
        await fn(i)
        out.append(time.perf_counter() - t)
    return p50_us(out)


def governance(**kw: Any) -> GovernanceConfig:
    return GovernanceConfig.model_validate(kw)


async def main(quick: bool) -> dict[str, Any]:
    n = 200 if quick else 2000
    cfg = GatewayConfig.model_validate({"models": [{"alias": "m", "backends": [{"type": "sim"}]}]})
    counters = ModelCounters(cfg.models)
    tokens = TokensStage(counters)
    model = cfg.models[0]

    async def count(i: int) -> None:
        ctx = ctx_for(i)
        ctx.model = model
        await tokens.run(ctx)

    result: dict[str, Any] = {"requests": n, "python": platform.python_version(),
                              "baseline_tokens_stage_us": await timed(n, count)}
    variants = {
        "guard_in_default_us": governance(),  # PII log + injection flag
        "guard_in_tokenize_us": governance(pii={"prompt": {"default": "tokenize"}}),
        "guard_in_mask_us": governance(pii={"prompt": {"default": "mask"}}),
        "guard_in_pii_only_us": governance(injection={"mode": "none"}),
        "guard_in_injection_only_us": governance(pii={"prompt": {"default": "allow"}}),
    }
    for name, gov in variants.items():
        stage = InputGuardStage(GuardPolicies(gov))

        async def guard(i: int, stage: InputGuardStage = stage) -> None:
            await stage.run(ctx_for(i))

        result[name] = await timed(n, guard)

    # output guard: a tokenized request's 200-event stream and its non-stream body
    policies = GuardPolicies(governance(pii={"prompt": {"default": "tokenize"}}))
    stage = InputGuardStage(policies)
    answer = "好的。" + TURN
    events: list[bytes] = []
    ctx0 = ctx_for(0)
    await stage.run(ctx0)
    state0 = ctx0.guard
    assert state0 is not None
    text = state0.vault.restore(answer)
    for v in ("13812345678", "zhang.san@example.com"):
        text = text.replace(v, state0.vault.tokenize(v, "X"))
    step = max(1, len(text) // 200)
    for k in range(0, len(text), step):
        obj = {"id": "c", "choices": [{"index": 0, "delta": {"content": text[k:k + step]},
                                       "finish_reason": None}]}
        events.append(b"data: " + orjson.dumps(obj))
    m = max(20, n // 20)
    t = time.perf_counter()
    for _ in range(m):
        rw = StreamRewrite(ctx0, state0)
        for ev in events:
            rw.event(ev)
    result["guard_out_stream_per_event_us"] = round((time.perf_counter() - t) / m
                                                    / len(events) * 1e6, 2)
    t = time.perf_counter()
    for _ in range(m):
        for ev in events:
            ev.split(b"\n\n")
    result["baseline_passthrough_per_event_us"] = round((time.perf_counter() - t) / m
                                                        / len(events) * 1e6, 3)
    full = orjson.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                              "content": text}}]})
    t = time.perf_counter()
    for _ in range(m):
        guard_body(CHAT, state0, full)
    result["guard_out_body_us"] = round((time.perf_counter() - t) / m * 1e6, 1)

    # audit: building the entry on the loop, and the append in the audit thread
    with tempfile.TemporaryDirectory() as tmp:
        audit_cfg = GovernanceConfig().audit
        # the gateway's redactor: the policies' analyzer, whose cache knows the history
        log = AuditLog(Path(tmp) / "a", b"k" * 32, retention="redacted",
                       redactor=audit_redactor(policies.analyzer))
        svc = AuditService(log, audit_cfg)
        fin = AuditFinisher(svc, policies)
        ctxs = []
        for i in range(n):
            c = ctx_for(i)
            await stage.run(c)
            ctxs.append(c)
        t = time.perf_counter()
        entries = [fin.entry(c) for c in ctxs]
        result["audit_entry_on_loop_us"] = round((time.perf_counter() - t) / n * 1e6, 1)
        t = time.perf_counter()
        for i, e in enumerate(entries):
            log.append(e, 1.7e9 + i)
        log.flush()
        result["audit_append_redacted_in_thread_us"] = round((time.perf_counter() - t) / n
                                                             * 1e6, 1)
        await svc.close()
    base = result["baseline_tokens_stage_us"]
    result["guard_in_default_vs_counting"] = round(result["guard_in_default_us"] / base, 2)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(main(args.quick)), indent=2))
