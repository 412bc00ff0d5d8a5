"""What each choice of a request will say, decided before the engine schedules it:
the text of every output token (the engine only counts them), where reasoning ends,
the tool calls, the finish reason and the logprobs.

Seeds. A choice's RNG is seeded by a hash of the prompt ids, mixed with the request's
``seed`` when it has one and with the choice's index when ``n > 1`` at a temperature
above 0. So the same request with the same seed gives the same text; a request without
a seed gives the same text too (the simulator's choice: reproducible runs and replays;
a real model would vary at temperature > 0); ``temperature: 0`` is greedy, so every
choice is the same and the seed does not matter.

Text. Free text is single-token English words (so it re-tokenizes to its count).
JSON (``response_format``) and tool-call arguments are serialized values
(``engine/json_instances.py``) encoded with the model's own tokenizer: the tokens
counted are those of the text. A stop sequence is written into free text at a seeded
point (always, when the request has one and there is room), and any stop sequence in
the output ends it there: the text before it is returned, finish_reason ``stop``, and
the tokens generated through the stop sequence are counted, as vLLM counts them.

Tools. ``tool_choice: required`` or a named tool always gets calls; ``auto`` gets them
at the behaviour's ``tool_call_rate`` (drawn from the request's seed), but never when
the last message is a tool result: then it answers in text, so an agent loop ends.
``required`` with ``parallel_tool_calls`` allowed and several tools calls two tools a
third of the time. A call's tokens are its name's and its arguments'.

Reasoning. ``reasoning_effort`` (or a reasoning model, ``engine/behaviour.py``) puts a
share of the answer's length as reasoning words first (``reasoning_content``).
"""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tokenplane.engine.behaviour import REASONING_EFFORT, SimBehaviour
from tokenplane.engine.json_instances import instance, json_object
from tokenplane.engine.logprobs import TokenLogprob, draw
from tokenplane.engine.sampling import Sampling, Tool
from tokenplane.engine.textgen import WordPool, prompt_seed
from tokenplane.tokens.base import Tokenizer

REASONING_SHARE = {"none": 0.0, "minimal": 0.1, "low": 0.25, "medium": 0.5, "high": 0.75,
                   "xhigh": 0.85}
NATURAL_LOW, NATURAL_HIGH = 16, 256
_ID_CHARS = string.ascii_letters + string.digits
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class CallPlan:
    """One tool call: tokens [start, args) spell its name, [args, end) its arguments."""

    id: str
    name: str
    start: int
    args: int
    end: int


@dataclass
class ChoicePlan:
    """One choice: ``pieces[i]`` is the text token i shows (``""``: none, e.g. the
    tokens of a stop sequence); tokens [0, reasoning) are reasoning, [reasoning,
    content_end) content, [content_end, len) tool calls."""

    pieces: list[str]
    reasoning: int
    finish: str
    content_end: int
    calls: list[CallPlan] | None = None
    logprobs: list[TokenLogprob | None] | None = None  # per token; None: not asked
    reasons: bool = False  # reasoning was asked for (reported even when 0 tokens)
    stop_sequence: str | None = None  # the stop sequence that ended it (vLLM's stop_reason)

    def content(self, upto: int | None = None) -> str:
        end = self.content_end if upto is None else min(upto, self.content_end)
        return "".join(self.pieces[self.reasoning:end])

    def reasoning_text(self) -> str:
        return "".join(self.pieces[:self.reasoning])

    def call_bodies(self) -> list[dict[str, Any]]:
        return [{"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": "".join(self.pieces[c.args:c.end])}}
                for c in self.calls or ()]

    def content_logprobs(self) -> list[TokenLogprob]:
        lps = self.logprobs or ()
        return [lp for lp in lps[self.reasoning:self.content_end] if lp is not None]


def _mix(value: int, salt: bytes) -> int:
    raw = value.to_bytes(16, "little", signed=True)
    return int.from_bytes(hashlib.blake2b(raw + salt, digest_size=8).digest(), "little")


def first_stop(text: str, stops: Sequence[str]) -> str | None:
    """The stop sequence that appears first in ``text`` (None: none does)."""
    found = [(at, s) for s in stops if (at := text.find(s)) >= 0]
    return min(found)[1] if found else None


def apply_stop(pieces: list[str], lo: int, hi: int, stops: Sequence[str]) -> int | None:
    """If a stop sequence appears in the text of tokens [lo, hi): cut the pieces to the
    text before it and return the end of the token that completes it; else None."""
    text = "".join(pieces[lo:hi])
    best = -1
    best_len = 0
    for s in stops:
        at = text.find(s)
        if at >= 0 and (best < 0 or at < best):
            best, best_len = at, len(s)
    if best < 0:
        return None
    end_char = best + best_len
    pos = 0
    for t in range(lo, hi):
        piece = pieces[t]
        nxt = pos + len(piece)
        keep = min(nxt, best) - pos
        if keep < len(piece):
            pieces[t] = piece[:keep] if keep > 0 else ""
        if nxt >= end_char:
            return t + 1
        pos = nxt
    return hi


class Planner:
    """Plans the choices of one service's requests (its tokenizer and vocabulary)."""

    def __init__(self, tokenizer: Tokenizer, pool: WordPool, words: dict[int, str],
                 model: str, behaviour: SimBehaviour) -> None:
        self._tok = tokenizer
        self._pool = pool
        self._words = words
        self._vocab = list(words.values())
        self.behaviour = behaviour
        self.reasoner = behaviour.reasons(model)

    def effort(self, requested: str | None) -> str | None:
        if requested is None and self.reasoner:
            return REASONING_EFFORT
        return requested

    def plain(self, ids: list[int], n_out: int, finish: str, effort: str | None) -> ChoicePlan:
        """The fast path: words seeded by the prompt, reasoning first."""
        words = self._words
        pieces = [words[i] for i in self._pool.output_ids(ids, n_out)]
        r = 0
        if effort is not None:
            r = min(int(n_out * REASONING_SHARE[effort]), n_out - 1)
        return ChoicePlan(pieces, r, finish, n_out, reasons=effort is not None)

    def plan(self, ids: list[int], s: Sampling, max_tokens: int | None, room: int,
             effort: str | None, body: dict[str, Any]) -> list[ChoicePlan]:
        """The ``s.n`` choices of a request with sampling fields; ``room``: tokens left
        in the window after the prompt."""
        base = prompt_seed(ids)
        if s.seed is not None and not s.greedy:
            base = _mix(s.seed, b"seed") ^ base
        calls_for_auto = s.tool_choice == "auto" and not _answers_tool(body)
        out = []
        for i in range(s.n):
            seed = base if i == 0 or s.greedy else base ^ _mix(i, b"choice")
            out.append(self._choice(seed, ids, s, max_tokens, room, effort, calls_for_auto))
        return out

    # --- one choice -----------------------------------------------------------------
    def _choice(self, seed: int, ids: list[int], s: Sampling, max_tokens: int | None,
                room: int, effort: str | None, calls_for_auto: bool) -> ChoicePlan:
        natural = NATURAL_LOW + seed % (NATURAL_HIGH - NATURAL_LOW + 1)
        aux = random.Random(_mix(seed, b"aux"))
        cap = max_tokens if max_tokens is not None else room
        share = REASONING_SHARE[effort] if effort is not None else 0.0
        call = s.tool_choice in ("required", "name") or (
            calls_for_auto and aux.random() < self.behaviour.tool_call_rate)
        if s.tools and call:
            plan = self._tool_calls(seed, s, aux, natural, share, cap)
        elif s.json_mode is not None:
            plan = self._json(seed, s, natural, share, cap)
        else:
            plan = self._text(seed, s, aux, natural, share, max_tokens, room)
        plan.reasons = effort is not None
        if s.top_logprobs is not None:
            lp_rng = random.Random(_mix(seed, b"logprobs"))
            k = s.top_logprobs
            plan.logprobs = [
                draw(lp_rng, plan.pieces[t], k, self._vocab)
                if plan.reasoning <= t < plan.content_end and plan.pieces[t] else None
                for t in range(len(plan.pieces))
            ]
        return plan

    def _text(self, seed: int, s: Sampling, aux: random.Random, natural: int, share: float,
              max_tokens: int | None, room: int) -> ChoicePlan:
        if max_tokens is not None:
            n_out, finish = max_tokens, "length"
        else:
            n_out, finish = (natural, "stop") if natural <= room else (room, "length")
        words = self._words
        pieces = [words[i] for i in random.Random(seed).choices(self._pool.ids, k=n_out)]
        r = min(int(n_out * share), n_out - 1) if share else 0
        if s.stop:
            stop = s.stop[aux.randrange(len(s.stop))]
            spelled = self._pieces(self._tok.encode(stop))
            room_for = n_out - r - len(spelled)
            if room_for >= 1:
                at = r + aux.randint(1, room_for)
                pieces[at:] = spelled
            matched = first_stop("".join(pieces[r:]), s.stop)
            end = apply_stop(pieces, r, len(pieces), s.stop)
            if end is not None:
                del pieces[end:]
                finish = "stop"
                return ChoicePlan(pieces, r, finish, len(pieces), stop_sequence=matched)
        return ChoicePlan(pieces, r, finish, len(pieces))

    def _reasoning(self, seed: int, natural: int, share: float) -> list[str]:
        count = int(natural * share)
        words = self._words
        return [words[i] for i in random.Random(seed).choices(self._pool.ids, k=count)]

    def _json(self, seed: int, s: Sampling, natural: int, share: float,
              cap: int) -> ChoicePlan:
        pieces = self._reasoning(seed, natural, share)
        r = len(pieces)
        rng = random.Random(_mix(seed, b"json"))
        if s.json_mode == "schema":
            value = instance(s.schema, rng)
        else:
            words = [self._words[i] for i in rng.choices(self._pool.ids, k=max(4, natural // 4))]
            value = json_object(rng, words)
        pieces.extend(self._pieces(self._tok.encode(orjson.dumps(value).decode())))
        finish = "stop"
        end = apply_stop(pieces, r, len(pieces), s.stop) if s.stop else None
        if end is not None:
            del pieces[end:]
        if len(pieces) > cap:
            del pieces[cap:]
            finish = "length"
        r = min(r, len(pieces))
        return ChoicePlan(pieces, r, finish, len(pieces))

    def _tool_calls(self, seed: int, s: Sampling, aux: random.Random, natural: int,
                    share: float, cap: int) -> ChoicePlan:
        pieces = self._reasoning(seed, natural, share)
        r = len(pieces)
        if s.tool_choice == "name":
            chosen = [t for t in s.tools if t.name == s.named_tool][:1]
        else:
            order = list(s.tools)
            aux.shuffle(order)
            many = (s.tool_choice == "required" and s.parallel_tool_calls and len(order) > 1
                    and aux.random() < 1 / 3)
            chosen = order[:2] if many else order[:1]
        rng = random.Random(_mix(seed, b"tools"))
        calls: list[CallPlan] = []
        for tool in chosen:
            calls.append(self._call(tool, rng, pieces))
        finish = "tool_calls"
        if len(pieces) > cap:
            del pieces[cap:]
            finish = "length"
            calls = [c for c in calls if c.start < cap]
            for c in calls:
                c.args, c.end = min(c.args, cap), min(c.end, cap)
        return ChoicePlan(pieces, min(r, len(pieces)), finish, min(r, len(pieces)), calls)

    def _call(self, tool: Tool, rng: random.Random, pieces: list[str]) -> CallPlan:
        call_id = "call_" + "".join(rng.choice(_ID_CHARS) for _ in range(24))
        schema = tool.parameters if tool.parameters is not None else _EMPTY_OBJECT
        args = orjson.dumps(instance(schema, rng)).decode()
        start = len(pieces)
        pieces.extend("" for _ in self._tok.encode(tool.name))
        mid = len(pieces)
        pieces.extend(self._pieces(self._tok.encode(args)))
        return CallPlan(call_id, tool.name, start, mid, len(pieces))

    def _pieces(self, ids: list[int]) -> list[str]:
        """The text each token shows; a character split across tokens shows on the
        token that completes it."""
        decode = self._tok.decode
        out: list[str] = []
        start = 0
        last = len(ids) - 1
        for i in range(len(ids)):
            text = decode(ids[start:i + 1])
            if text.endswith("\ufffd") and i < last:
                out.append("")
                continue
            out.append(text)
            start = i + 1
        return out


def _answers_tool(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    last = messages[-1]
    return isinstance(last, dict) and last.get("role") in ("tool", "function")
