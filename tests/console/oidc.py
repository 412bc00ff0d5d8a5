"""A real OpenID Connect provider for the console's tests: npm's ``oidc-provider``
(pinned), installed once into a cache directory the tests own
(``$TOKENPLANE_OIDC_CACHE``, else ``~/.cache/tokenplane-oidc``) and run by node with
tests/console/oidc_provider.mjs. Without node (or npm, for the first install) the
tests skip; under CI=true they fail."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

VERSION = "9.13.3"
SCRIPT = Path(__file__).resolve().parent / "oidc_provider.mjs"


def _needs(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the OIDC tests must run in CI: {reason}")
    pytest.skip(reason)


def provider_lib() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokenplane-oidc"
    cache = Path(os.environ.get("TOKENPLANE_OIDC_CACHE", default))
    lib = cache / "node_modules/oidc-provider/lib/index.js"
    package = cache / "node_modules/oidc-provider/package.json"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists() and json.loads(package.read_text())["version"] == VERSION:
            return lib
        npm = shutil.which("npm")
        if npm is None:
            _needs("npm is not installed (the first run installs oidc-provider)")
        assert npm is not None
        (cache / "package.json").write_text('{"name": "tokenplane-test-oidc", "private": true}')
        out = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(cache),
                              f"oidc-provider@{VERSION}"], capture_output=True, text=True,
                             timeout=600)
        if out.returncode != 0:
            _needs(f"npm install oidc-provider@{VERSION} failed: {out.stderr[-500:]}")
    return lib


@contextmanager
def oidc_provider(port: int, redirect_uri: str, accounts: dict[str, dict[str, str]],
                  secret: str) -> Iterator[str]:
    """The provider on 127.0.0.1:``port``; yields its issuer URL."""
    node = shutil.which("node")
    if node is None:
        _needs("node is not installed")
    assert node is not None
    lib = provider_lib()
    env = {**os.environ, "OIDC_ACCOUNTS": json.dumps(accounts), "OIDC_CLIENT_SECRET": secret}
    proc = subprocess.Popen([node, str(SCRIPT), str(lib), str(port), redirect_uri], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "ready" not in line:
            proc.kill()
            raise AssertionError(f"oidc-provider did not start: {line} "
                                 f"{proc.communicate(timeout=10)[1][-2000:]}")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
