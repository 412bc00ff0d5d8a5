"""Huge prompts (issue 13, item 3): one that cannot fit the context window is refused
(400 ``context_length_exceeded``) before it is tokenized, whatever the governance;
one that may fit is counted off the event loop, so other clients keep being served
while it is counted, and one tenant's big counts do not hold another tenant's back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.pipeline.count_offload import OFFLOAD_BYTES, CountOffload
from tokenplane.pipeline.guard_stages import InputGuardStage
from tokenplane.pipeline.stages import TokensStage

MODEL = "sim-llama3-8b"
BIG = 600_000  # characters: a floor of ~4,700 tokens, beyond a 4,096-token window


class Tokenizing:
    """Watches (and can hold) the alias's tokenizer in the gateway: the texts it was
    given, and, while ``hold`` is clear, counts of long texts wait for it."""

    def __init__(self, gw: GatewayThread, long: int = 20_000) -> None:
        self.tok = gw.gateway.counters.tokenizer(MODEL)
        self.long = long
        self.seen: list[int] = []  # lengths of the texts tokenized
        self.started: list[str] = []  # first letter of each long text, as counted
        self.counting = 0  # long counts under way
        self.hold = threading.Event()
        self.hold.set()
        self.held_too_long = False
        self.changed = threading.Condition()
        for name in ("count", "encode"):
            setattr(self.tok, name, self._wrap(getattr(self.tok, name)))

    def _wrap(self, real: Callable[[str], Any]) -> Callable[[str], Any]:
        def watched(text: str) -> Any:
            self.seen.append(len(text))
            if len(text) < self.long:
                return real(text)
            with self.changed:
                self.started.append(text.lstrip()[:1])
                self.counting += 1
                self.changed.notify_all()
            try:
                if not self.hold.wait(10):
                    self.held_too_long = True
                return real(text)
            finally:
                with self.changed:
                    self.counting -= 1
                    self.changed.notify_all()
        return watched

    def wait_for(self, cond: Callable[[], bool], timeout: float = 20) -> None:
        """Until ``cond()`` (woken by the tokenizer's changes, else checked every
        50 ms: the gateway's queue of counts changes without telling us)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not cond():
                assert time.monotonic() < deadline, "the condition never came"
                self.changed.wait(0.05)


def chat(client: openai.OpenAI, content: str, max_tokens: int = 2) -> Any:
    return client.chat.completions.create(
        model=MODEL, max_tokens=max_tokens, messages=[{"role": "user", "content": content}])


def client(gw: GatewayThread, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)


def assert_too_long(exc: openai.BadRequestError) -> None:
    err = exc.body
    assert isinstance(err, dict)
    assert err["code"] == "context_length_exceeded"
    assert err["param"] == "messages"
    assert exc.response.headers["x-request-id"].startswith("req_")


GOVERNANCE = {
    "default": {},  # on, as by default: log PII, screen injection
    "off": {"governance": {"enabled": False}},
    "masking": {"governance": {"pii": {"prompt": {"default": "mask"}}}},
}


@pytest.mark.parametrize("governance", list(GOVERNANCE))
def test_prompt_beyond_window_refused_untokenized(tmp_path: Path, governance: str) -> None:
    cfg = {**sim_config(replicas=1, context_window=4096), **GOVERNANCE[governance]}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        watch = Tokenizing(gw)
        c = client(gw, gw.create_key("default"))
        for text in ("lorem ipsum " * (BIG // 12), "Ünïcödé ✓ 数据 " * (BIG // 12)):
            with pytest.raises(openai.BadRequestError) as err:
                chat(c, text)
            assert_too_long(err.value)
        assert max(watch.seen, default=0) < 20_000, "a refused prompt was tokenized"
        # the floor is that of what is counted: the template trims this to a few tokens
        assert chat(c, " " * BIG + "Hello").usage.prompt_tokens < 100
        # one that fits by its floor but not by its count is counted, then refused
        with pytest.raises(openai.BadRequestError) as err:
            chat(c, "a b c d " * 20_000)  # 160,000 characters, ~80,000 tokens; floor 1,250
        assert_too_long(err.value)
        assert max(watch.seen) >= 160_000
    finally:
        gw.stop()


def test_over_window_prompt_refused_before_the_guard_scans_it(tmp_path: Path) -> None:
    """A window the floor cannot settle (100,000 tokens): the prompt is counted, off the
    loop, before the input guard, whose scans of it would cost as much again, and
    refused without being scanned."""
    gw = GatewayThread(sim_config(replicas=1, context_window=100_000), tmp_path).start()
    try:
        guard = next(s for s in gw.gateway.pipeline.stages if isinstance(s, InputGuardStage))
        scanned: list[int] = []
        real = guard.run

        async def watched(ctx: Any) -> None:
            scanned.append(len(ctx.raw))
            await real(ctx)

        guard.run = watched  # type: ignore[method-assign]
        watch = Tokenizing(gw)
        c = client(gw, gw.create_key("default"))
        with pytest.raises(openai.BadRequestError) as err:  # ~160,000 tokens; floor 2,500
            chat(c, "a b c d " * 40_000)
        assert_too_long(err.value)
        assert max(watch.seen) >= 320_000  # counted ...
        assert max(scanned, default=0) < 100_000  # ... but never scanned
        assert chat(c, "a b c d " * 10_000).usage.prompt_tokens > 10_000  # fits: guarded
        assert max(scanned) >= 80_000
    finally:
        gw.stop()


@pytest.fixture
def big_window(tmp_path: Path) -> Iterator[GatewayThread]:
    gw = GatewayThread(sim_config(replicas=1, context_window=200_000), tmp_path).start()
    yield gw
    gw.stop()


def test_small_requests_served_while_a_big_prompt_is_counted(
        big_window: GatewayThread) -> None:
    gw = big_window
    watch = Tokenizing(gw)
    watch.hold.clear()
    big = client(gw, gw.create_key("acme"))
    small = client(gw, gw.create_key("default"))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(chat, big, "x y " * 40_000)
        watch.wait_for(lambda: watch.counting == 1)  # being counted, and held there
        for i in range(5):  # served meanwhile: the count does not hold the loop
            assert chat(small, f"hello {i}").choices[0].message.content is not None
        assert watch.counting == 1 and not watch.held_too_long
        watch.hold.set()
        assert pending.result(60).usage.prompt_tokens >= 40_000


def test_one_tenants_big_prompts_do_not_hold_anothers(big_window: GatewayThread) -> None:
    gw = big_window
    stage = next(s for s in gw.gateway.pipeline.stages if isinstance(s, TokensStage))
    offload = stage.offload
    assert offload is not None and offload.slots == 2
    watch = Tokenizing(gw)
    watch.hold.clear()
    greedy = client(gw, gw.create_key("acme"))
    other = client(gw, gw.create_key("default"))
    with ThreadPoolExecutor(4) as pool:
        mine: list[Future[Any]] = [pool.submit(chat, greedy, "a " * 40_000) for _ in range(3)]
        watch.wait_for(lambda: offload.running("acme") + offload.waiting("acme") == 3)
        theirs = pool.submit(chat, other, "b " * 40_000)
        watch.wait_for(lambda: "b" in watch.started)  # counted beside acme's first
        assert watch.started.count("a") == 1 and not watch.held_too_long
        watch.hold.set()
        for f in [*mine, theirs]:
            assert f.result(60).usage.prompt_tokens >= 40_000


async def test_offload_rotation_and_cancel() -> None:
    """The fair queue on its own: a tenant at its share waits; tenants in turn are
    served in rotation; a count given up while waiting leaves the queue."""
    import asyncio

    off = CountOffload(slots=1, per_tenant=1)
    gate = threading.Event()
    order: list[str] = []

    def job(name: str) -> Callable[[], str]:
        def run() -> str:
            order.append(name)
            gate.wait(10)
            return name
        return run

    first = asyncio.create_task(off.run("a", job("a1")))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(off.run(t, job(n)))
             for t, n in (("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1"))]
    gone = asyncio.create_task(off.run("c", job("c2")))
    for _ in range(3):
        await asyncio.sleep(0)
    gone.cancel()
    gate.set()
    await asyncio.gather(first, *tasks)
    assert order == ["a1", "a2", "b1", "c1", "a3"]
    assert off.waiting("c") == 0 and off.running("a") == 0
    assert OFFLOAD_BYTES <= 64 * 1024
