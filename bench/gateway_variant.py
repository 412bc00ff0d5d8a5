"""``tokenplane serve`` with one part of the usage path taken out, to measure its cost.

Only for ``bench/bench_metering_cost.py``; never a way to run the gateway.

    python bench/gateway_variant.py VARIANT serve [serve options]

``nofsync``: the journal writes but does not ``fdatasync``; ``nowait``: the answer does
not wait for the journal (it still writes, syncs and flushes to the ledger);
``nojournal``: no journal at all (nothing reaches the ledger); ``thread``: the journal
syncs with its writer thread instead of on the event loop (native AIO), as where AIO is
missing.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from tokenplane.cli.main import main as tokenplane_main
from tokenplane.metering.journal import journal


def _done() -> asyncio.Future[None]:
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut


def apply(variant: str) -> None:
    if variant == "nofsync":
        setattr(os, "fdatasync", lambda fd: None)  # noqa: B010 (the journal calls it)
    elif variant == "nowait":
        append = journal.Journal.append

        def no_wait(self: journal.Journal, event: Any) -> asyncio.Future[None]:
            append(self, event)
            return _done()

        setattr(journal.Journal, "append", no_wait)  # noqa: B010
    elif variant == "thread":
        init = journal.Journal.__init__

        def thread_init(self: journal.Journal, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **{**kwargs, "use_aio": False})

        setattr(journal.Journal, "__init__", thread_init)  # noqa: B010
    elif variant == "nojournal":
        setattr(journal.Journal, "append", lambda self, event: _done())  # noqa: B010
    else:
        raise SystemExit(f"unknown variant {variant!r}")


if __name__ == "__main__":
    apply(sys.argv[1])
    sys.argv = ["tokenplane", *sys.argv[2:]]
    tokenplane_main()
