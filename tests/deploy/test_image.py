"""The gateway image: built from Containerfile by scripts/build-image (a debootstrap
base imported into podman, ``podman build --isolation chroot``), then its file
system (a container's, ``podman mount``) run under ``chroot`` as the image's
non-root user, with the image's entrypoint, environment and a mounted YAML config:
it serves a chat request through the official SDK, stops on SIGTERM with exit 0,
and the request is in the ledger on the data volume afterwards.

Containers cannot be started on the CI host (crun may not set rlimits), hence
chroot. Building needs root, debootstrap and podman (scripts/test installs them);
without them the test skips, under CI=true it fails. The base's tarball and
podman's layers are cached in the build's cache directory
(``$TOKENPLANE_IMAGE_CACHE``, else ``~/.cache/tokenplane-image``), keyed by what
makes them, so only a cold cache builds everything (docs/OPERATIONS.md, "The
image")."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.deploy.schema_check import ROOT
from tests.gateway.harness import free_port

USER = "10001:10001"


def _needs(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the image test must run in CI: {reason}")
    pytest.skip(reason)


def _cache() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tokenplane-image"
    return Path(os.environ.get("TOKENPLANE_IMAGE_CACHE", default))


def _podman(*args: str, check: bool = True) -> str:
    cache = _cache()
    out = subprocess.run(
        ["podman", "--root", str(cache / "storage"), "--runroot", str(cache / "run"),
         "--storage-driver", "overlay", "--cgroup-manager", "cgroupfs", "--events-backend",
         "file", *args], capture_output=True, text=True, timeout=600, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {out.stderr}")
    return out.stdout.strip()


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    if os.geteuid() != 0:
        _needs("building the image needs root")
    for tool in ("debootstrap", "podman"):
        if shutil.which(tool) is None:
            _needs(f"{tool} is not installed (scripts/test installs it)")
    tag = f"localhost/tokenplane:test-{os.getpid()}"
    started = time.monotonic()
    out = subprocess.run([str(ROOT / "scripts/build-image"), "--tag", tag,
                          "--cache", str(_cache())], capture_output=True, text=True,
                         timeout=1800, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.strip().splitlines()[-1] == tag
    print(f"image built in {time.monotonic() - started:.0f} s")
    yield tag
    _podman("rmi", tag, check=False)  # the tag only: the layers stay cached


@contextlib.contextmanager
def _mounted(image: str) -> Iterator[Path]:
    """A container's root file system (its own writable layer) on the host, with
    /proc and /dev for the chrooted process."""
    cid = _podman("create", image)
    root = Path(_podman("mount", cid))
    mounts: list[Path] = []
    try:
        for what, args in (("proc", ["-t", "proc", "proc"]), ("dev", ["--bind", "/dev"])):
            target = root / what
            subprocess.run(["mount", *args, str(target)], check=True)
            mounts.append(target)
        yield root
    finally:
        for target in reversed(mounts):
            subprocess.run(["umount", "-l", str(target)], check=False)
        _podman("umount", cid, check=False)
        _podman("rm", "-f", cid, check=False)


def _inspect(image: str) -> dict[str, Any]:
    (info,) = json.loads(_podman("image", "inspect", image))
    return dict(info["Config"])


def test_the_image_is_slim_non_root_and_has_the_kernels(image: str) -> None:
    config = _inspect(image)
    assert config["User"] == USER
    assert config["Entrypoint"] == ["tokenplane", "serve"]
    assert "/var/lib/tokenplane" in config["Volumes"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["TOKENPLANE_HOME"] == "/var/lib/tokenplane"
    with _mounted(image) as root:
        assert not (root / "usr/bin/gcc").exists()  # the compiler stayed in the build stage
        site = next((root / "opt/tokenplane/lib").glob("python3*/site-packages"))
        assert list((site / "tokenplane/tokens").glob("_words*.so"))
        assert list((site / "tokenplane/context").glob("_units*.so"))
        assert (root / "var/lib/tokenplane").stat().st_uid == 10001


def test_the_chrooted_image_serves_a_chat_request_and_drains(image: str,
                                                             tmp_path: Path) -> None:
    config = _inspect(image)
    env = dict(e.split("=", 1) for e in config["Env"])
    port, metrics = free_port(), free_port()
    with _mounted(image) as root:
        (root / "etc/tokenplane/config.yaml").write_text(yaml.safe_dump({
            "server": {"host": "0.0.0.0", "port": 8080},
            "models": [{"alias": "m", "backends": [{"type": "sim", "replicas": 1}]}],
            "tenants": [{"name": "acme"}]}))
        volume = tmp_path / "data"  # the data volume, owned by the image's user
        volume.mkdir()
        os.chown(volume, 10001, 10001)
        data = root / "var/lib/tokenplane"
        subprocess.run(["mount", "--bind", str(volume), str(data)], check=True)
        try:
            env["TOKENPLANE_CONFIG"] = "/etc/tokenplane/config.yaml"
            env["TOKENPLANE_AUDIT_KEY"] = "k" * 32
            # the entrypoint with Kubernetes-style args: a port of our own on loopback
            argv = [*config["Entrypoint"], "--host", "127.0.0.1", "--port", str(port),
                    "--metrics-listen", f"127.0.0.1:{metrics}"]
            cmd = ["chroot", f"--userspec={USER}", str(root), "/usr/bin/env", "-i",
                   *(f"{k}={v}" for k, v in env.items()), *argv]
            log = (tmp_path / "gw.log").open("wb")
            proc = subprocess.Popen(cmd, cwd="/", stdout=subprocess.PIPE, stderr=log, text=True)
            try:
                key = _serving(proc, tmp_path)
                uid = next(ln for ln in Path(f"/proc/{proc.pid}/status").read_text()
                           .splitlines() if ln.startswith("Uid:"))
                assert uid.split()[1:3] == ["10001", "10001"]
                assert httpx.get(f"http://127.0.0.1:{metrics}/health", timeout=10
                                 ).status_code == 200
                with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                                   api_key=key) as client:
                    reply = client.chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "Hello from chroot"}],
                        max_tokens=8)
                assert reply.choices[0].message.content
                assert reply.usage is not None and reply.usage.prompt_tokens > 0
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(60) == 0, (tmp_path / "gw.log").read_text()[-3000:]
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(30)
                if proc.stdout is not None:
                    proc.stdout.close()
                log.close()
            report = subprocess.run(
                ["chroot", f"--userspec={USER}", str(root), "/usr/bin/env", "-i",
                 *(f"{k}={v}" for k, v in env.items()),
                 "tokenplane", "usage", "--format", "json", "--home", "/var/lib/tokenplane"],
                cwd="/", capture_output=True, text=True, timeout=120, check=True)
            rows = json.loads(report.stdout)
            assert sum(int(r["requests"]) for r in rows) == 1, rows
            assert (volume / "meta.db").stat().st_uid == 10001
        finally:
            subprocess.run(["umount", "-l", str(data)], check=False)


def _serving(proc: subprocess.Popen[str], tmp_path: Path) -> str:
    """Read the gateway's stdout until its banner; the first start's admin key."""
    assert proc.stdout is not None
    key = None
    for line in proc.stdout:
        if line.strip().startswith("tp-"):
            key = line.strip()
        if "tokenplane gateway on" in line:
            break
    else:
        raise AssertionError(f"the chrooted gateway exited with {proc.wait()}: "
                             f"{(tmp_path / 'gw.log').read_text()[-3000:]}")
    assert key is not None
    return key
