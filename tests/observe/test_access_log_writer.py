"""The access log writer keeps lines whole when several workers share a pipe."""

from __future__ import annotations

import asyncio
import os
import threading

from tokenplane.observe.access_log import AccessLog, _pieces


def test_pieces_are_whole_lines_within_the_pipe_limit() -> None:
    lines = [b"x" * n + b"\n" for n in (10, 4000, 100, 5000, 3, 4095)]
    chunk = b"".join(lines)
    pieces = _pieces(chunk, 4096)
    assert b"".join(pieces) == chunk
    assert all(p.endswith(b"\n") for p in pieces)
    assert all(len(p) <= 4096 or p.count(b"\n") == 1 for p in pieces)


def test_two_logs_on_one_pipe_never_split_a_line() -> None:
    """Two writers (as two workers on one inherited stderr) flushing big batches into the
    same pipe: every line read back is one a writer wrote, whole."""
    r, w = os.pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(r, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()

    async def run() -> None:
        logs = [(name, AccessLog(None, batch_lines=400, fd=w)) for name in (b"a", b"b")]
        for _, log in logs:
            log.start()
        for i in range(4000):
            for name, log in logs:
                log.add(name * 300 + b" %d\n" % i)
        for _, log in logs:
            await log.close()

    asyncio.run(run())
    os.close(w)
    reader.join()
    lines = bytes(got).splitlines()
    assert len(lines) == 8000
    assert all(ln.startswith((b"a" * 300 + b" ", b"b" * 300 + b" ")) for ln in lines)
