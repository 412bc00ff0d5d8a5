"""An OpenAI-compatible upstream that holds every request until told to answer, on a
real port in a thread: a hung engine (never released) or one whose requests all end
at a moment the test picks."""

from __future__ import annotations

import asyncio
import threading

import orjson

from tests.gateway.harness import free_port

ANSWER = orjson.dumps({
    "id": "chatcmpl-held", "object": "chat.completion", "created": 0, "model": "held",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
})


class HeldUpstream:
    def __init__(self) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._seen = threading.Condition()
        self.requests = 0
        self._release: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> HeldUpstream:
        self._thread.start()

        async def up() -> None:
            self._release = asyncio.Event()
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(10)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            with self._seen:
                self.requests += 1
                self._seen.notify_all()
            assert self._release is not None
            await self._release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\nconnection: close\r\n\r\n" % len(ANSWER)
                         + ANSWER)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    def wait_requests(self, n: int, timeout: float = 30) -> bool:
        """Block until ``n`` requests have arrived in all."""
        with self._seen:
            return self._seen.wait_for(lambda: self.requests >= n, timeout)

    def release(self) -> None:
        """Answer every held request, and every later one at once."""
        assert self._release is not None
        self.loop.call_soon_threadsafe(self._release.set)

    def stop(self) -> None:
        async def down() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            if self._server is not None:
                await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
