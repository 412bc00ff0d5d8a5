"""A rolling upgrade keeps serving: release N (this repository's tree just before the
newest change of the metadata schema, src/tokenplane/meta/pg_meta.py, taken from git)
and release N+1 (this tree) serve at once on one PostgreSQL database. N starts
first and creates the schema and the first admin key; N+1 starts while N serves and
applies its expand-only migration; then keys made on either work on both, chat
requests succeed through both, and a revocation on N+1 reaches N."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from tests.gateway.gateway_process import ROOT
from tests.gateway.harness import free_port
from tests.services import fresh_pg_schema

CONFIG = {"models": [{"alias": "m", "backends": [{"type": "sim", "replicas": 1}]}],
          "tenants": [{"name": "acme"}]}


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=60,
                          check=False)


def previous_release(into: Path) -> Path:
    """The src/ tree of release N, extracted under ``into``; skips without history."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    newest = _git("log", "-n1", "--format=%H", "--", "src/tokenplane/meta/pg_meta.py")
    commit = newest.stdout.decode().strip()
    if newest.returncode != 0 or not commit:
        pytest.skip("no git history here (a shallow or exported tree)")
    archive = _git("archive", "--format=tar", f"{commit}^", "src")
    if archive.returncode != 0:
        pytest.skip(f"release N ({commit}^) is not in this clone's history")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


class Release:
    def __init__(self, src: Path, config: Path, home: Path, url: str, log: Path) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
        env.update(PYTHONPATH=str(src), TOKENPLANE_HOME=str(home), TOKENPLANE_DATABASE_URL=url)
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenplane", "serve", "--config", str(config), "--port",
             str(self.port)], env=env, cwd=home.parent, stdout=subprocess.PIPE,
            stderr=self._log, text=True)
        self.out = ""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out += line
            if "tokenplane gateway on" in line:
                break
        else:
            self.close()
            raise AssertionError(f"exited with {self.proc.returncode}: {log.read_text()[-2000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def chat(self, key: str) -> str:
        with openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0) as client:
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        return reply.choices[0].message.content or ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()


@pytest.fixture
def releases(tmp_path: Path) -> Iterator[tuple[Release, Release]]:
    old_src = previous_release(tmp_path / "release-n")
    with fresh_pg_schema("rolling") as url:
        started: list[Release] = []
        try:
            for name, src in (("n", old_src), ("n1", ROOT / "src")):
                config = tmp_path / f"{name}.yaml"
                config.write_text(yaml.safe_dump({
                    **CONFIG, "observe": {"metrics": {"listen": f"127.0.0.1:{free_port()}"}}}))
                started.append(Release(src, config, tmp_path / f"home-{name}", url,
                                       tmp_path / f"{name}.log"))
            yield started[0], started[1]
        finally:
            for r in started:
                r.close()


@pytest.mark.postgres
def test_release_n_and_n1_serve_one_database_at_once(releases: tuple[Release, Release]) -> None:
    n, n1 = releases
    admin = next(ln.strip() for ln in n.out.splitlines() if ln.strip().startswith("tp-"))
    assert "tp-" not in n1.out  # N+1 found N's key: one bootstrap
    assert n.chat(admin) and n1.chat(admin)
    auth = {"authorization": f"Bearer {admin}"}
    with httpx.Client(timeout=30, headers=auth) as http:
        assert http.post(f"{n.url}/admin/v1/tenants", json={"name": "acme"}).status_code == 201
        from_n = http.post(f"{n.url}/admin/v1/tenants/acme/keys", json={"name": "old"})
        assert from_n.status_code == 201, from_n.text
        from_n1 = http.post(f"{n1.url}/admin/v1/tenants/acme/keys",
                            json={"name": "new", "expires_in": "30d"})
        assert from_n1.status_code == 201, from_n1.text
        for key in (from_n.json()["key"], from_n1.json()["key"]):
            assert _eventually(lambda k=key: bool(n.chat(k) and n1.chat(k)))
        listed = http.get(f"{n1.url}/admin/v1/tenants/acme/keys").json()["data"]
        assert {k["name"] for k in listed} == {"old", "new"}
        assert http.delete(f"{n1.url}/admin/v1/keys/{from_n.json()['id']}").status_code == 200
    assert _eventually(lambda: _refused(n, from_n.json()["key"]))


def _refused(release: Release, key: str) -> bool:
    try:
        release.chat(key)
    except openai.AuthenticationError:
        return True
    return False


def _eventually(check: object, timeout: float = 10.0) -> bool:
    """``check()`` true within ``timeout`` (the metadata poll is 0.5 s)."""
    assert callable(check)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return True
        except openai.AuthenticationError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
