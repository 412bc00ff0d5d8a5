"""The simulated engine as a real-time, OpenAI-compatible service (vLLM's shapes).

An asyncio driver task runs the engine loop against the wall clock: step, sleep the
step's modelled duration, deliver the emitted tokens to the requests' queues (with
the ``instant`` profile it still yields to the event loop every step).
``EngineService.handle(method, path, body, headers)`` answers:

    POST /v1/chat/completions, POST /v1/completions   (stream and non-stream)
    POST /v1/embeddings      deterministic unit vectors, exact usage
    GET  /v1/models          POST /tokenize ({"count", "tokens", "max_model_len"})
    GET  /health             GET /metrics (Prometheus text, vLLM names)
    GET  /sim/requests       the last recorded request bodies (record_bodies=True)

Output: ``max_tokens`` / ``max_completion_tokens`` tokens if given (finish_reason
"length"), else a length of 16..256 derived from a hash of the prompt ("stop").
Tokens are single-token English words drawn with the prompt as seed, so the text
re-tokenizes to the reported count. ``reasoning_effort`` turns a share of the output
into ``reasoning_content`` and reports ``completion_tokens_details.reasoning_tokens``.

Test hooks (request headers):
    x-sim-fail: <status>     answer with that error status (OpenAI error envelope).
    x-sim-fail-after: <n>    a stream drops the connection after n tokens (the
                             stream raises ``SimulatedDrop``; the server closes the
                             socket) and the engine request is aborted.
Closing a stream early (``aclose()``, client gone) aborts the engine request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from tokenplane.dialects.anthropic.edge import ANTHROPIC
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.dialects.base import AnswerInfo
from tokenplane.dialects.extensions import strip_extensions
from tokenplane.engine.behaviour import SimBehaviour
from tokenplane.engine.core import Engine, EngineRequest, StepResult
from tokenplane.engine.defaults import PromptIds
from tokenplane.engine.endpoints import embeddings_body, models_body, tokenize_body
from tokenplane.engine.generation import Generation, SimulatedDrop, SSEStream
from tokenplane.engine.kinds import GenerationKind, served_kinds
from tokenplane.engine.planning import ChoicePlan, Planner
from tokenplane.engine.profiles import EngineProfile
from tokenplane.engine.serving.metrics import CONTENT_TYPE, EngineMetricsExporter
from tokenplane.engine.textgen import WordPool, block_hashes, natural_length
from tokenplane.engine.validation import check_model, parse_generation, parse_json_object
from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.registry import standard_operations
from tokenplane.tokens.base import Tokenizer

__all__ = ["EngineService", "ServiceResponse", "SimulatedDrop"]

_log = logging.getLogger(__name__)

JSON = {"content-type": "application/json"}
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
Body = dict[str, Any]
Headers = Mapping[str, str]
Handler = Callable[[Body, Headers], Awaitable['ServiceResponse']]


@dataclass
class ServiceResponse:
    status: int
    headers: dict[str, str]
    body: bytes | None
    stream: AsyncIterator[bytes] | None
    prompt_tokens: int = 0  # a generation's prompt length (Messages' opening event)


class _Live:
    __slots__ = ("arrival", "gen", "index", "last")

    def __init__(self, gen: Generation, index: int, arrival: float) -> None:
        self.gen = gen
        self.index = index  # the choice this engine request generates
        self.arrival = arrival
        self.last: float | None = None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    for key, val in headers.items():
        if key.lower() == name:
            return val
    return None


def _int_header(headers: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = _header(headers, name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise invalid(f"header {name} must be an integer") from None
    if not low <= value <= high:
        raise invalid(f"header {name} must be between {low} and {high}")
    return value


class EngineService:
    """One simulated replica: an Engine, its real-time driver, and its HTTP semantics."""

    def __init__(
        self,
        engine_or_profile: Engine | EngineProfile,
        tokenizer: Tokenizer,
        prompt_ids: PromptIds,
        model_name: str,
        clock: Callable[[], float] = time.monotonic,
        *,
        max_model_len: int = 8192,
        record_bodies: bool = False,
        record_limit: int = 100,
        seed: int = 0,
        jitter: float = 0.0,
        behaviour: SimBehaviour | None = None,
    ) -> None:
        if isinstance(engine_or_profile, Engine):
            self.engine = engine_or_profile
        else:
            self.engine = Engine(engine_or_profile, seed=seed, jitter=jitter)
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_model_len = max_model_len
        self.metrics = EngineMetricsExporter(self.engine, model_name)
        self._prompt_ids = prompt_ids
        self._clock = clock
        pool = WordPool(tokenizer)
        words = {i: tokenizer.decode([i]) for i in pool.ids}
        self._planner = Planner(tokenizer, pool, words, model_name, behaviour or SimBehaviour())
        self._block_size = self.engine.profile.block_size
        self._lives: dict[str, _Live] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set while the engine has nothing to do
        self._task: asyncio.Task[None] | None = None
        self._record: deque[Any] | None = deque(maxlen=record_limit) if record_bodies else None
        self._created = int(time.time())
        self._ids = itertools.count()
        self._closed = False
        self._kinds = served_kinds()  # the endpoint kinds, by operation name
        self._dialect_for = standard_operations().dialect_for
        self._routes: dict[str, tuple[str, Handler]] = {
            kind.operation.path: ("POST", kind.handler(self)) for kind in self._kinds
        }
        self._routes |= {
            "/tokenize": ("POST", self._tokenize),
            "/v1/messages/count_tokens": ("POST", self.count_tokens),
            "/v1/models": ("GET", self._models),
            "/health": ("GET", self._health),
            "/metrics": ("GET", self._metrics),
            "/sim/requests": ("GET", self._recorded),
        }

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._closed = False
            self._wake = asyncio.Event()  # bound to the loop that runs the driver
            self._idle = asyncio.Event()
            if self.engine.has_work():
                self._wake.set()
            self._task = asyncio.get_running_loop().create_task(self._drive())

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail_all()

    def _fail_all(self) -> None:
        for rid, live in list(self._lives.items()):
            self.engine.abort(rid)
            live.gen.queue.put_nowait(None)
        self._lives.clear()

    async def _drive(self) -> None:
        engine = self.engine
        while True:
            if not engine.has_work():
                self._wake.clear()
                self._idle.set()
                await self._wake.wait()
                continue
            start = self._clock()
            try:
                res = engine.step(start)
            except Exception:  # a bug must not leave every client hanging
                _log.exception("engine step failed; failing the requests in flight")
                self._fail_all()
                continue
            delay = start + res.duration - self._clock()
            await asyncio.sleep(delay if delay > 0 else 0)
            self._deliver(res, self._clock())

    def _deliver(self, res: StepResult, now: float) -> None:
        lives = self._lives
        metrics = self.metrics
        for rid, count in res.emitted.items():
            live = lives.get(rid)
            if live is None:
                continue
            if live.last is None:
                metrics.ttft.observe(now - live.arrival)
            else:
                metrics.itl.observe(now - live.last)
            live.last = now
            live.gen.queue.put_nowait((live.index, count))
        for fin in res.finished:
            live = lives.pop(fin.request_id, None)
            if live is not None:
                metrics.e2e.observe(now - live.arrival)
                live.gen.queue.put_nowait((live.index, fin))

    def _abort(self, rid: str) -> None:
        self._lives.pop(rid, None)
        self.engine.abort(rid)
        if not self.engine.has_work():
            self._idle.set()

    async def wait_idle(self) -> None:
        """Returns once the engine has no request running or waiting."""
        if self.engine.has_work():
            self._idle.clear()
            await self._idle.wait()

    # --- HTTP semantics ----------------------------------------------------------------
    async def handle(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> ServiceResponse:
        try:
            return await self._route(method.upper(), path, body, headers)
        except GatewayError as err:  # in the envelope of the API spoken at ``path``
            dialect = self._dialect_for(path)
            rid = f"req_{uuid.uuid4().hex[:24]}"
            return ServiceResponse(dialect.error_status(err.status),
                                   {**JSON, **err.headers}, dialect.error_body(err, rid), None)

    async def _route(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str]
    ) -> ServiceResponse:
        entry = self._routes.get(path)
        if entry is None:
            raise GatewayError(404, f"no route for {path}", code="not_found")
        if method != entry[0]:
            raise GatewayError(405, f"{path} accepts {entry[0]}, not {method}",
                               code="method_not_allowed")
        if method == "POST":
            data = parse_json_object(body)
            if self._record is not None:
                self._record.append(data)
        else:
            data = {}
        status = _int_header(headers, "x-sim-fail", 400, 599)
        if status is not None:
            raise GatewayError(status, f"simulated failure (x-sim-fail: {status})",
                               code="simulated_failure")
        result: ServiceResponse = await entry[1](data, headers)
        return result

    async def generate(
        self, kind: GenerationKind, body: dict[str, Any], headers: Mapping[str, str],
        ceiling: bool = False,
    ) -> ServiceResponse:
        """A chat or completions request (the engine kind says which). ``ceiling``: the
        output cap is only a ceiling, as a model treats Messages' required ``max_tokens``
        (the answer ends at its natural length below it); else, as the OpenAI kinds'
        tests expect, a cap that is set is the answer's length."""
        params = parse_generation(body, kind)
        check_model(params.model, self.model_name)
        fail_after = _int_header(headers, "x-sim-fail-after", 0, 10**9)
        batch = kind.prompt_batch(self._prompt_ids, body)  # one prompt but for a batch
        cap = params.max_tokens
        effort = self._planner.effort(params.reasoning_effort)
        plans: list[ChoicePlan] = []
        shapes: list[tuple[int, list[int]]] = []  # per choice: prompt length, block hashes
        firsts: list[int] = []  # each prompt's first choice
        for ids in batch:
            prompt_len = len(ids)
            if prompt_len == 0:
                raise invalid("the prompt is empty", param=kind.prompt_param)
            room = self._room(prompt_len, params.max_tokens)
            limit = cap
            if ceiling and limit is not None:
                room, limit = min(room, limit), None
            if params.sampling is None:
                if limit is not None:
                    n_out, finish = limit, "length"
                else:
                    natural = natural_length(ids)
                    n_out, finish = (natural, "stop") if natural <= room else (room, "length")
                own = [self._planner.plain(ids, n_out, finish, effort)]
            else:
                own = self._planner.plan(ids, params.sampling, limit, room, effort, body)
            firsts.append(len(plans))
            plans.extend(own)
            shape = (prompt_len, block_hashes(ids, self._block_size))
            shapes.extend(shape for _ in own)
        prompt_len = sum(len(ids) for ids in batch)
        rid = f"{kind.id_prefix}-{uuid.uuid4().hex}-{next(self._ids)}"
        fmt = kind.formatter(rid, int(time.time()), self.model_name, params.include_usage)
        gen = Generation(rid, prompt_len, plans, fmt, self._abort, firsts)
        if self._task is None:
            if self._closed:
                raise GatewayError(503, "the engine is shut down", code="shutting_down")
            await self.start()
        now = self._clock()
        added: list[str] = []
        try:
            for index, (sub, plan, (own_len, hashes)) in enumerate(
                    zip(gen.sub_ids, plans, shapes, strict=True)):
                self.engine.add(EngineRequest(sub, own_len, len(plan.pieces), hashes, now), now)
                added.append(sub)
                self._lives[sub] = _Live(gen, index, now)
        except ValueError as exc:
            for sub in added:
                self._abort(sub)
            raise invalid(str(exc), code="context_length_exceeded") from None
        self._idle.clear()
        self._wake.set()
        if params.stream:
            return ServiceResponse(200, dict(SSE_HEADERS), None, SSEStream(gen, fail_after),
                                   prompt_len)
        await gen.wait()
        return ServiceResponse(200, dict(JSON), gen.body(), None, prompt_len)

    async def messages(self, body: Body, headers: Headers) -> ServiceResponse:
        """Anthropic's Messages API natively (as vLLM and SGLang serve it): the body read
        as the canonical chat request, generated as chat, answered as Messages (the
        prefix cache's hits reported as ``cache_read_input_tokens``)."""
        chat = strip_extensions(to_chat(body))
        resp = await self.generate(self._kinds.generation(CHAT.name), chat, headers,
                                   ceiling=True)
        info = AnswerInfo(self.model_name, f"req_{uuid.uuid4().hex[:24]}", resp.prompt_tokens)
        if resp.stream is None:
            return ServiceResponse(resp.status, dict(JSON),
                                   ANTHROPIC.answer(resp.body or b"", info), None)
        return ServiceResponse(resp.status, dict(SSE_HEADERS), None,
                               ANTHROPIC.stream(resp.stream, info), resp.prompt_tokens)

    async def count_tokens(self, body: Body, headers: Headers) -> ServiceResponse:
        """``/v1/messages/count_tokens``: the Messages prompt's tokens as this engine's
        tokenizer and chat template count them."""
        chat = strip_extensions(to_chat({"max_tokens": 1, **body}))
        ids = self._kinds.generation(CHAT.name).prompt_ids(self._prompt_ids, chat)
        return ServiceResponse(200, dict(JSON), orjson.dumps({"input_tokens": len(ids)}), None)

    def _room(self, prompt_len: int, max_tokens: int | None) -> int:
        """Tokens the window leaves after the prompt (400 when the request cannot fit)."""
        limit = self.max_model_len
        if max_tokens is not None:
            if prompt_len + max_tokens > limit:
                raise invalid(
                    f"This model's maximum context length is {limit} tokens. However, you "
                    f"requested {prompt_len + max_tokens} tokens ({prompt_len} in the "
                    f"messages, {max_tokens} in the completion). Please reduce the length "
                    "of the messages or completion.",
                    param="max_tokens", code="context_length_exceeded",
                )
        elif prompt_len >= limit:
            raise invalid(
                f"This model's maximum context length is {limit} tokens. However, your "
                f"prompt has {prompt_len} tokens. Please reduce the length of the messages.",
                param="messages", code="context_length_exceeded",
            )
        return limit - prompt_len

    async def embed(self, body: Body, headers: Headers) -> ServiceResponse:
        out = embeddings_body(body, self.tokenizer, self.model_name,
                              self.max_model_len)
        return ServiceResponse(200, dict(JSON), out, None)

    async def _tokenize(self, body: Body, headers: Headers) -> ServiceResponse:
        kind = self._kinds.generation(CHAT.name if "messages" in body else COMPLETIONS.name)
        kind.check(body)
        tokens = kind.prompt_ids(self._prompt_ids, body)
        return ServiceResponse(200, dict(JSON), tokenize_body(tokens, self.max_model_len), None)

    async def _models(self, body: Body, headers: Headers) -> ServiceResponse:
        out = models_body(self.model_name, self.max_model_len, self._created)
        return ServiceResponse(200, dict(JSON), out, None)

    async def _health(self, body: Body, headers: Headers) -> ServiceResponse:
        return ServiceResponse(200, {}, b"", None)

    async def _metrics(self, body: Body, headers: Headers) -> ServiceResponse:
        return ServiceResponse(200, {"content-type": CONTENT_TYPE}, self.metrics.render(), None)

    async def _recorded(self, body: Body, headers: Headers) -> ServiceResponse:
        if self._record is None:
            raise GatewayError(404, "request recording is off (record_bodies=False)",
                               code="not_found")
        return ServiceResponse(200, dict(JSON), orjson.dumps(list(self._record)), None)
