"""Progress of long CLI work (issue 17): plain timestamped lines when standard error
is not a terminal (CI, pipes), a live rich line on a terminal; the result stays on
standard output."""

from __future__ import annotations

import io
import re
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
    r = CliRunner().invoke(build_cli(), [
        "report", "compliance", "--month", "2026-11", "--out", str(tmp_path / "c.html"),
        "--home", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "compliance report 2026-11: done" in r.stderr
    assert r.stdout.strip() == f"wrote {tmp_path / 'c.html'}"
