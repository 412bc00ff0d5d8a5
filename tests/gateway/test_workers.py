"""``serve --workers N`` as real processes: a worker killed with ``kill -9`` is replaced
(the port keeps serving, a new pid), and what it acknowledged reaches the ledger within
seconds, while the gateway runs, through a sibling's adoption or the replacement's
replay. A stop (SIGTERM) still stops everyone and restarts nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.gateway_process import GatewayProcess, create_key
from tests.gateway.harness import GatewayThread, free_port, sim_config
from tests.gateway.ledger_checks import read_ledger
from tests.gateway.test_durability import MODEL, Load, _config, _env

WRITER = Path(__file__).resolve().parents[1] / "metering" / "writer_proc.py"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(180)


def _until(cond: Callable[[], bool], timeout: float, step: float = 0.1) -> float:
    """Poll ``cond`` until true; the seconds it took (fails after ``timeout``). Only for
    what other processes change (a ``serve --workers`` gateway's ledger, its worker
    processes), where there is no event to wait on; the pause leaves the two cores to
    the gateway being watched."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(step)
    return time.monotonic() - start


def _ledger_ids(ledger: str) -> set[str]:
    events, _ = read_ledger(ledger)
    return {e["request_id"] for e in events}


def test_a_sibling_adopts_a_dead_workers_journal_within_seconds(tmp_path: Path) -> None:
    """A running gateway worker replays the journal of a writer that died beside it
    (acknowledged, never flushed) within a few seconds, without any restart."""
    adopted = threading.Event()

    class Adoption(logging.Handler):  # the meter says when it replayed a dead journal
        def emit(self, record: logging.LogRecord) -> None:
            if "from the journal of" in record.getMessage():
                adopted.set()

    meter_log = logging.getLogger("tokenplane.metering.meter")
    handler, level = Adoption(), meter_log.level
    meter_log.addHandler(handler)
    meter_log.setLevel(logging.INFO)
    gw = GatewayThread(sim_config(), tmp_path).start()
    try:
        ledger = str(tmp_path / "ledger.db")
        proc = subprocess.Popen([sys.executable, str(WRITER), "ack", str(tmp_path), ledger,
                                 "dead"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert proc.stdout is not None
        acked: list[str] = []
        while len(acked) < 400:
            line = proc.stdout.readline()
            assert line, "writer exited early"
            acked.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        killed = time.monotonic()
        assert adopted.wait(5), "no sibling adopted the dead writer's journal"
        assert time.monotonic() - killed < 5
        assert set(acked) <= _ledger_ids(ledger)  # all of it, as the replay's log said
    finally:
        gw.stop()
        meter_log.removeHandler(handler)
        meter_log.setLevel(level)


def _workers_up(gw: GatewayProcess, n: int, gone: set[int]) -> Callable[[], bool]:
    def check() -> bool:
        pids = set(gw.worker_pids())
        return len(pids) == n and not pids & gone
    return check


def test_a_killed_worker_is_replaced_and_its_usage_reaches_the_ledger(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = _env(home, None)
    key = create_key(env, "acme", "workers")
    ledger = str(home / "ledger.db")
    gw = GatewayProcess(_config(tmp_path), env, tmp_path / "gateway.log", workers=2)
    try:
        pids = gw.worker_pids()
        assert len(pids) == 2
        victim = pids[1]
        load = Load(gw.base_url, key)

        async def kill_one_mid_load() -> None:
            task = asyncio.create_task(load.run_until(lambda: None, 160))
            await load.reached(80)
            gw.kill9(victim)
            await task

        asyncio.run(kill_one_mid_load())
        completed = set(load.completed)
        # everything acknowledged is in the ledger within seconds, the gateway running
        _until(lambda: completed <= _ledger_ids(ledger), timeout=8)
        # a new worker took the dead one's place
        _until(_workers_up(gw, 2, {victim}), timeout=60)
        replacement = (set(gw.worker_pids()) - set(pids)).pop()
        # the port keeps serving, the replacement included (connections spread over
        # both workers: many of them, each new)
        for _ in range(40):
            with httpx.Client(timeout=30) as client:
                resp = client.post(f"{gw.base_url}/chat/completions",
                                   headers={"authorization": f"Bearer {key}"},
                                   json={"model": MODEL, "max_tokens": 2, "messages": [
                                       {"role": "user", "content": "still there?"}]})
                assert resp.status_code == 200, resp.text
        assert replacement in gw.worker_pids()
        log = (tmp_path / "gateway.log").read_text()
        assert "died (killed by signal 9)" in log and "restarting worker w1" in log
        # a stop stops everyone and restarts nothing
        assert gw.terminate() == 0
        assert not Path(f"/proc/{replacement}").exists()
    finally:
        gw.close()
    events, _ = read_ledger(ledger)
    ids = [e["request_id"] for e in events]
    assert len(ids) == len(set(ids)), "a request is in the ledger twice"
    assert completed <= set(ids)


def _scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with httpx.Client(timeout=10) as client:  # a new connection: any worker may take it
        resp = client.get(url)
    assert resp.status_code == 200, resp.text
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(resp.text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    return sum(v for _, v in samples.get(name, []))


def test_one_scrape_sums_every_worker(tmp_path: Path) -> None:
    """``serve --workers 2``: requests over many connections land on both workers; every
    scrape of the metrics listener counts all of them (counters and histograms summed),
    whichever worker answers it."""
    home = tmp_path / "home"
    env = _env(home, None)
    key = create_key(env, "acme", "metrics")
    cfg = yaml.safe_load(_config(tmp_path).read_text())
    metrics_port = free_port()
    cfg["observe"] = {"metrics": {"listen": f"127.0.0.1:{metrics_port}"}}
    path = tmp_path / "workers.yaml"
    path.write_text(yaml.safe_dump(cfg))
    gw = GatewayProcess(path, env, tmp_path / "gateway.log", workers=2)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    try:
        n = 48
        for i in range(n):  # each on a new connection: SO_REUSEPORT spreads them
            with httpx.Client(timeout=30) as client:
                resp = client.post(f"{gw.base_url}/chat/completions",
                                   headers={"authorization": f"Bearer {key}"},
                                   json={"model": MODEL, "max_tokens": 2, "stream": i % 2 == 1,
                                         "messages": [{"role": "user", "content": f"hi {i}"}]})
                assert resp.status_code == 200, resp.text
        _until(lambda: _total(_scrape(url), "tokenplane_requests_total") == n, timeout=5)
        for _ in range(8):
            s = _scrape(url)
            assert _total(s, "tokenplane_requests_total") == n
            assert _total(s, "tokenplane_request_duration_seconds_count") == n
            assert dict((lab["state"], v) for lab, v in s["tokenplane_scrape_workers"]) == {
                "answered": 2, "expected": 2}
            # a gauge of each worker's own view keeps a series per worker
            assert {lab["worker"] for lab, _ in s["tokenplane_endpoint_healthy"]} == {"w0", "w1"}
            # _created is one timestamp per worker: left out of the sum
            assert not any(name.endswith("_created") for name in s)
        with httpx.Client(timeout=10) as client:  # not on the public port without a key
            assert client.get(gw.base_url.removesuffix("/v1") + "/metrics").status_code == 401
        # a worker dies: no scrape's sum goes down (Prometheus would read a reset), while
        # it is away nor once its replacement answers
        pids = gw.worker_pids()
        gw.kill9(pids[0])
        answered: list[float] = []
        deadline = time.monotonic() + 90
        while len(answered) < 3 or answered[-1] < 2:  # scraped until the replacement answers
            assert time.monotonic() < deadline, "the replacement never answered"
            try:
                s = _scrape(url)
            except httpx.TransportError:
                continue  # queued on the dying worker's socket: a failed scrape, not a value
            assert _total(s, "tokenplane_requests_total") == n
            assert _total(s, "tokenplane_request_duration_seconds_count") == n
            states = dict((lab["state"], v) for lab, v in s["tokenplane_scrape_workers"])
            answered.append(states["answered"])  # each scrape takes its own time
        assert 1 in answered  # one scrape at least came while it was away
        assert pids[0] not in gw.worker_pids()
        assert gw.terminate() == 0
    finally:
        gw.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_taken_metrics_port_stops_the_start(tmp_path: Path, workers: int) -> None:
    """A metrics port someone else holds is refused, clearly, before any worker runs
    (several workers share it with SO_REUSEPORT: they would join another gateway's
    workers silently)."""
    env = _env(tmp_path / "home", None)
    cfg = yaml.safe_load(_config(tmp_path).read_text())
    with socket.create_server(("127.0.0.1", 0), reuse_port=True) as taken:  # as workers do
        port = taken.getsockname()[1]
        cfg["observe"] = {"metrics": {"listen": f"127.0.0.1:{port}"}}
        path = tmp_path / "taken.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = subprocess.Popen([sys.executable, "-m", "tokenplane", "serve", "--config",
                                 str(path), "--port", str(free_port()), "--workers", str(workers)],
                                env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the parent and the workers it started
            proc.communicate()
            raise AssertionError("serve started on a metrics port another gateway holds") from None
    assert proc.returncode == 2, stderr
    assert f"observe.metrics.listen: cannot listen on 127.0.0.1:{port}" in stderr
    assert "tokenplane gateway on" not in stdout
