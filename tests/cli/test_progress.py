"""Progress of long CLI work (issue 17): plain timestamped lines when standard error
is not a terminal (CI, pipes), a live rich line on a terminal; the result stays on
standard output."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.cli.progress import Progress


def test_plain_lines_count_the_steps() -> None:
    out = io.StringIO()
    with Progress("plan", 2, stream=out, live=False) as bar:
        bar.step("base hour 08: 2 replicas needed")
        bar.step("looking at hour 09", 0)
        bar.step("base hour 09: 3 replicas needed")
    lines = out.getvalue().splitlines()
    assert [re.sub(r"^\[\s*[0-9.]+s\] ", "", ln) for ln in lines] == [
        "plan (2 steps)", "1/2 base hour 08: 2 replicas needed", "looking at hour 09",
        "2/2 base hour 09: 3 replicas needed", "plan: done"]
    assert all(re.match(r"^\[\s*[0-9]+\.[0-9]s\] ", ln) for ln in lines)


def test_a_failure_does_not_say_done() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), Progress("replay", stream=out, live=False) as bar:
        bar.step("reading", 0)
        raise RuntimeError("boom")
    assert "done" not in out.getvalue()


def test_live_on_a_terminal() -> None:
    out = io.StringIO()
    with Progress("simulate", 3, stream=out, live=True) as bar:
        for i in range(3):
            bar.step(f"policy {i}")
    text = out.getvalue()
    assert "simulate: policy 2" in text and "3/3" in text


def test_a_command_reports_progress_apart_from_its_result(tmp_path: Path) -> None:
    args = ["report", "compliance", "--month", "2026-11", "--out", str(tmp_path / "c.html"),
            "--home", str(tmp_path)]
    r = CliRunner().invoke(build_cli(), args, env={"TOKENPLANE_PROGRESS": "plain"})
    assert r.exit_code == 0, r.output
    assert "compliance report 2026-11: done" in r.stderr
    assert r.stdout.strip() == f"wrote {tmp_path / 'c.html'}"
    quiet = CliRunner().invoke(build_cli(), args, env={"TOKENPLANE_PROGRESS": ""})
    assert quiet.exit_code == 0 and quiet.stderr == ""  # not a terminal: no progress


def _run_with_stderr(args: list[str], terminal: bool) -> tuple[int, str, str]:
    """``python -m tokenplane ARGS`` with standard error on a pseudo-terminal (or a
    pipe); standard output always a pipe. Exit code, stdout, stderr."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
           "TOKENPLANE_PROGRESS": "", "COLUMNS": "100", "TERM": "xterm",
           "TOKENPLANE_PROGRESS_DELAY": "0"}  # these are quick: show it at once
    if not terminal:
        r = subprocess.run([sys.executable, "-m", "tokenplane", *args], env=env,
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tokenplane", *args], env=env,
                                stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        assert proc.stdout is not None
        with proc.stdout:
            out = proc.stdout.read().decode()
        rc = proc.wait(120)
    finally:
        os.close(master)
    return rc, out, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("args", [
    ["report", "compliance", "--month", "2026-11"],
    ["audit", "verify"],
    ["usage", "--by", "tenant"],
])
def test_progress_on_a_terminal_and_none_on_a_pipe(tmp_path: Path, args: list[str]) -> None:
    """Issue 31: long commands show a live progress line when standard error is a
    terminal, and print nothing of it into a pipe."""
    home = tmp_path / "home"
    if args[0] == "audit":
        _audit_log(home)
    elif args[0] == "usage":
        _ledger(home)
    else:
        args = [*args, "--out", str(tmp_path / "c.html")]
    full = [*args, "--home", str(home if home.exists() else tmp_path)]
    rc, out, err = _run_with_stderr(full, terminal=True)
    title = {"report": "compliance report 2026-11", "audit": "audit verify",
             "usage": "usage"}[args[0]]
    assert title in err and "0:00:0" in err, err  # the live line and its elapsed time
    assert "\x1b[" in err  # rich's live line: cursor and colour codes
    rc2, out2, err2 = _run_with_stderr(full, terminal=False)
    assert (rc2, out2) == (rc, out)
    assert "0:00:0" not in err2 and "\x1b[" not in err2, err2
    assert not re.search(r"^\[\s*[0-9.]+s\] ", err2, re.M), err2  # nor plain lines


def _ledger(home: Path) -> None:
    import asyncio

    from tests.metering.factories import make_event
    from tokenplane.metering.stores.open import open_sink

    home.mkdir(parents=True)

    async def write() -> None:
        sink = await open_sink(home / "ledger.db")
        try:
            await sink.write([make_event(i) for i in range(5)])
        finally:
            await sink.close()

    asyncio.run(write())


def _audit_log(home: Path) -> None:
    from tokenplane.governance.audit.entry import AuditEntry
    from tokenplane.governance.audit.keyfile import resolve_key
    from tokenplane.governance.audit.log import AuditLog

    home.mkdir(parents=True)
    key, _ = resolve_key(home, "TOKENPLANE_AUDIT_KEY") or (b"", None)
    log = AuditLog(home / "audit" / "main", key, retention="none")
    for i in range(3):
        log.append(AuditEntry(request_id=f"r{i}", tenant="acme", status=200), ts=1.0e9 + i)
    log.close()
