"""Deterministic varied text (English, Chinese, code, emoji, mixed) for token tests."""

from __future__ import annotations

import random


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


EN_WORDS = _words(
    "the quick brown fox jumps over lazy dog gateway token budget request model latency "
    "throughput tenant policy schedule fairness cache prefix engine replica capacity report "
    "invoice department analytics customer support ticket summary translate explain why how "
    "internationalization extraordinary configuration parameters reliability 2024 42 3.14"
)
ZH_WORDS = _words(
    "我们 今天 模型 推理 服务 请求 令牌 预算 租户 调度 公平 缓存 前缀 引擎 副本 容量 报告 "
    "客户 支持 工单 摘要 翻译 解释 为什么 怎么样 人工智能 大语言模型 数据中心 北京 上海 "
    "春天 学习 工作 问题 答案 系统 网络 安全 隐私 成本 延迟 吞吐量 你好 谢谢"
)
ZH_PUNCT = ("，", "。", "？", "！", "、", "；")
CODE_LINES = (
    "def handle(request: Request) -> Response:",
    "    tokens = counter.count(request.messages)",
    "    if tokens > budget.limit: raise QuotaError(tokens)",
    "for (int i = 0; i < n; ++i) { total += a[i] * b[i]; }",
    "const result = await fetch(`/v1/chat/${id}`, { method: 'POST' });",
    "SELECT tenant, SUM(tokens) FROM usage WHERE day >= $1 GROUP BY tenant;",
    '    return {"id": uid, "items": [x.to_dict() for x in items]}',
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); }",
    "#include <stdio.h>",
    "    self._cache[key] = value  # LRU",
)
EMOJI = ("😀", "🚀", "👍🏽", "🇨🇳", "❤️", "👨‍👩‍👧", "🔥", "✅")


def english(rng: random.Random, words: int) -> str:
    out = []
    for i in range(words):
        w = rng.choice(EN_WORDS)
        out.append(w.capitalize() if i == 0 or rng.random() < 0.05 else w)
        if rng.random() < 0.1:
            out[-1] += rng.choice((",", ".", "?", "!", ";"))
    return " ".join(out) + "."


def chinese(rng: random.Random, words: int) -> str:
    out = []
    for _ in range(words):
        out.append(rng.choice(ZH_WORDS))
        if rng.random() < 0.15:
            out.append(rng.choice(ZH_PUNCT))
    return "".join(out) + "。"


def code(rng: random.Random, lines: int) -> str:
    return "\n".join(rng.choice(CODE_LINES) for _ in range(lines)) + "\n"


def emoji(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(EMOJI) + rng.choice(("", " ok", "好")) for _ in range(n))


def mixed(rng: random.Random, size: int) -> str:
    parts = []
    for _ in range(max(1, size // 10)):
        kind = rng.randrange(4)
        if kind == 0:
            parts.append(english(rng, rng.randint(3, 15)))
        elif kind == 1:
            parts.append(chinese(rng, rng.randint(3, 15)))
        elif kind == 2:
            parts.append(code(rng, rng.randint(1, 3)))
        else:
            parts.append(emoji(rng, rng.randint(1, 4)))
    return rng.choice(("\n", " ", "\n\n", "")).join(parts)


GENERATORS = {"english": english, "chinese": chinese, "code": code, "emoji": emoji, "mixed": mixed}
