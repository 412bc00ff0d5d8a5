"""Screenshots of every console page for docs/console/ (shown in the README).

Serves a gateway over a ledger with 30 days of generated history (bench_console's
generator) plus live traffic through the official client, a budget and an SLO, and
photographs each page with Debian's Chromium under Playwright: signed in with an admin
key, in English, and the Overview and Usage pages once more in Chinese.

    scripts/console_screenshots [--out docs/console] [--events 60000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import openai
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_console import free_port, write  # noqa: E402

from tokenplane.meta.keystore import KeyStore  # noqa: E402
from tokenplane.meta.limit_store import LimitStore, LimitTarget  # noqa: E402

CONFIG = """\
models:
  - alias: m0
    chat_template: llama3
    prices: {input: "0.10", cached_input: "0.05", output: "0.40"}
    backends: [{type: sim, profile: instant, replicas: 3}]
tenants: [{name: tenant03}, {name: tenant07}]
observe: {metrics: {listen: null}, access_log: {enabled: false}}
slo_alerting: {evaluate_every: 2s}
slos:
  - name: chat-latency
    description: Answers start within a second for 99% of requests.
    selector: {model: m0}
    objective: 0.99
    slis: [{kind: ttft, threshold: 1s}, {kind: availability}]
"""
PAGES = ("overview", "usage", "budgets", "slos", "cluster", "sessions", "audit", "versions",
         "advice")
CHROMIUM = os.environ.get("TOKENPLANE_CHROMIUM", "/usr/bin/chromium")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    ap.add_argument("--events", type=int, default=60_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="console-shots-"))
    asyncio.run(write(home, args.events, time.time() - 90))
    keys = KeyStore(home / "meta.db")
    admin, _ = keys.create_key("ops", admin=True)
    users = [keys.create_key("tenant03", department="dept2", app="app21")[0],
             keys.create_key("tenant07", department="dept0", app="app02")[0]]
    keys.close()
    limits = LimitStore(home / "meta.db")
    limits.set(LimitTarget("tenant03"), {"tokens_per_day": 40_000_000, "rpm": 600,
                                         "budget_micros": 900_000_000})
    limits.set(LimitTarget("tenant07", "dept0", "app02"), {"tokens_per_month": 250_000_000})
    limits.close()
    (home / "gw.yaml").write_text(CONFIG)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenplane", "serve", "--config", str(home / "gw.yaml"),
         "--port", str(port)], env={**os.environ, "TOKENPLANE_HOME": str(home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # a bounded wait for the server process to listen
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the gateway did not start")
            time.sleep(0.2)
        for i in range(40):  # live traffic: the last minutes' tokens/s, latency, audit
            with openai.OpenAI(base_url=base + "/v1", api_key=users[i % 2]) as c:
                c.chat.completions.create(model="m0", max_tokens=32, messages=[
                    {"role": "system", "content": "You are a concise assistant."},
                    {"role": "user", "content": f"Summarise ticket {i} in one line."}])
        with openai.OpenAI(base_url=base + "/v1", api_key=users[0]) as c:
            msgs: list[Any] = [{"role": "system", "content": "You plan trips, step by step."},
                               {"role": "user", "content": "Plan three days in Kyoto."}]
            for step in range(5):  # an agent session (where the gateway records them)
                r = c.chat.completions.create(model="m0", max_tokens=48, messages=msgs,
                                              extra_headers={"x-tokenplane-session": "trip-42"})
                msgs += [{"role": "assistant", "content": r.choices[0].message.content or ""},
                         {"role": "user", "content": f"Now detail day {step + 1}."}]
        time.sleep(3)  # the ledger flusher (250 ms) and one SLO evaluation round (2 s)
        args.out.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM)
            for lang in ("en-US", "zh-CN"):
                ctx = browser.new_context(locale=lang, viewport={"width": 1360, "height": 900})
                page = ctx.new_page()
                page.goto(base + "/console/login")
                page.fill("#key", admin)
                page.click("#sign-in")
                page.wait_for_url("**/console/overview")
                for name in PAGES if lang == "en-US" else ("overview", "usage"):
                    page.goto(f"{base}/console/{name}")
                    page.wait_for_load_state("networkidle")
                    first = page.locator("#sessions-table a")
                    if name == "sessions" and first.count():  # a session's waterfall
                        first.first.click()
                        page.wait_for_load_state("networkidle")
                    suffix = "" if lang == "en-US" else "-zh"
                    # the Advice page lists 50 findings a page: its top 2,400 pixels show
                    # the chart and the first findings
                    clip = ({"x": 0, "y": 0, "width": 1360, "height": 2400}
                            if name == "advice" else None)
                    page.screenshot(path=str(args.out / f"{name}{suffix}.png"), full_page=True,
                                    clip=clip)  # type: ignore[arg-type]
                    print(f"{args.out / name}{suffix}.png")
                ctx.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
