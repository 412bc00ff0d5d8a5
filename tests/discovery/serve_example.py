"""``examples/discovery.yaml`` served (imported by tests/test_examples.py, which
checks that every example has its ``test_serves_<name>``): its Kubernetes backend
against the fake API server, its A backend through ``localhost``, its SRV backend
through a local DNS server, all in front of the module's simulated engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import yaml

from tests.discovery.dns_server import DnsServer
from tests.discovery.load import routable, wait_for
from tests.gateway.harness import GatewayThread
from tests.kube.fake_api import FakeKube, write_kubeconfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "discovery.yaml"
MSGS: Any = [{"role": "user", "content": "Tell me about token budgets."}]


def test_serves_discovery(llama_sim: list[int], tmp_path: Path) -> None:
    kube = FakeKube().start()
    dns = DnsServer().start()
    gw: GatewayThread | None = None
    try:
        serving = kube.add_workload("deployments", "vllm-llama3-8b", replicas=1, ready=1,
                                    namespace="inference")
        warm = kube.add_workload("deployments", "vllm-llama3-8b-warm", replicas=0,
                                 namespace="inference")
        kube.set_slice("vllm-llama3-8b-x1", "vllm-llama3-8b", llama_sim[0],
                       [("127.0.0.1", True, False)], namespace="inference")
        dns.set("_http._tcp.engines.internal", "SRV", [f"0 5 {llama_sim[2]} 127.0.0.1."])
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube.url, kube.token)
        text = EXAMPLE.read_text(encoding="utf-8")
        for old, new in {"/etc/tokenplane/kubeconfig": str(kubeconfig),
                         "port: 8001": f"port: {llama_sim[1]}",
                         "127.0.0.1:5353": dns.address}.items():
            assert old in text
            text = text.replace(old, new)
        gw = GatewayThread(yaml.safe_load(text), tmp_path / "gw").start()
        want = {"llama3-8b": {f"k8s/127.0.0.1:{llama_sim[0]}"},
                "llama3-8b-edge": {f"dns/127.0.0.1:{llama_sim[1]}",
                                   f"srv/127.0.0.1:{llama_sim[2]}"}}
        g = gw
        wait_for(g, lambda: all(routable(g, a) == ids for a, ids in want.items()),
                 "every discovered replica")
        key = gw.create_key("default", app="discovery")
        with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
            for alias in want:
                for _ in range(4):
                    r = c.chat.completions.create(model=alias, messages=MSGS, max_tokens=5)
                    assert r.usage is not None and r.usage.completion_tokens == 5
        # the autoscaler reads both workloads through their /scale subresource
        wait_for(g, lambda: {("GET", "/apis/apps/v1/namespaces/inference/deployments/"
                              f"{n}/scale") for n in (serving.name, warm.name)}
                 <= set(kube.requests), "the autoscaler's reads")
        gw.stop()
        rows = gw.ledger_rows("app = 'discovery'")
        gw = None
        assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
        assert {r["backend"] for r in rows if r["model"] == "llama3-8b"} == \
            want["llama3-8b"]
        assert {r["backend"] for r in rows if r["model"] == "llama3-8b-edge"} <= \
            want["llama3-8b-edge"]
    finally:
        if gw is not None:
            gw.stop()
        dns.stop()
        kube.stop()
