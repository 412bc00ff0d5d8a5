"""The ``cache:`` section is validated (a Redis store needs redis_url, rules name
known models and tenants), the policy resolves rules in order, and the embedding
model embeds in batches exactly as one by one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cache.harness import cache_config
from tokenplane.cache.keys import Scope, exact_key, semantic_key
from tokenplane.cache.policy import CachePolicy, deterministic
from tokenplane.compose.config_file import ConfigError, validate_config
from tokenplane.config.cache_schema import CacheConfig
from tokenplane.embeddings.model import UseEmbedder, clipped


@pytest.mark.parametrize("cache, needle", [
    ({"store": "redis"}, "redis_url"),
    ({"rules": [{"model": "nope"}]}, "unknown model alias"),
    ({"rules": [{"tenant": "gamma"}]}, "unknown tenant"),
    ({"semantic": {"threshold": 1.5}}, "threshold"),
    ({"billing": {"mode": "half"}}, "mode"),
    ({"exact": {"ttl_s": 0}}, "ttl_s"),
    ({"surprise": True}, "surprise"),
])
def test_bad_cache_configs_are_refused(cache: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_config(cache_config(cache))
    assert needle in str(err.value)


def test_rules_first_match_wins() -> None:
    cfg = CacheConfig.model_validate({"semantic": {"enabled": False}, "rules": [
        {"tenant": "t", "app": "bot", "semantic": True, "threshold": 0.95},
        {"tenant": "t", "exact": False},
        {"model": "m", "nondeterministic": True}]})
    pol = CachePolicy(cfg)
    det = {"temperature": 0}
    hot = {"temperature": 0.7}
    bot = pol.decide("t", "bot", "m", det)
    assert (bot.exact, bot.semantic, bot.threshold) == (True, True, 0.95)
    other = pol.decide("t", "wiki", "m", det)
    assert (other.exact, other.semantic) == (False, False)
    assert pol.decide("u", "x", "m", hot).exact  # opted into nondeterministic
    assert not pol.decide("u", "x", "k", hot).exact
    assert deterministic({"seed": 3, "temperature": 1}) and not deterministic({"seed": True})
    assert not deterministic({"temperature": 0, "n": 2})


def test_keys_ignore_field_order_and_see_every_sampling_field() -> None:
    s = Scope("t", "a", "m", "")
    body = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "top_p": 1}
    same = {"top_p": 1, "temperature": 0, "messages": [{"content": "hi", "role": "user"}]}
    assert exact_key(s, "chat", body, False) == exact_key(s, "chat", same, False)
    assert exact_key(s, "chat", body, False) != exact_key(s, "chat", body, True)
    assert exact_key(s, "chat", body, False) != exact_key(s, "chat", {**body, "top_p": 0.5},
                                                           False)
    assert exact_key(s, "chat", body, False) != exact_key(Scope("u", "a", "m", ""), "chat",
                                                           body, False)
    k1 = semantic_key(s, "chat", body, False)
    k2 = semantic_key(s, "chat", {**body, "messages": [{"role": "user", "content": " HI "}]},
                      False)
    assert k1 is not None and k2 is not None
    assert k1.partition == k2.partition and k1.text == k2.text == "hi"
    tool_turn = {"messages": [{"role": "user", "content": "x"}, {"role": "tool",
                                                                   "content": "y"}]}
    assert semantic_key(s, "chat", tool_turn, False) is None


def test_embedder_batches_like_single_calls() -> None:
    emb = UseEmbedder(batch=8)
    texts = [f"How do I reset password number {i}?" for i in range(11)] + ["重置密码", ""]
    many = emb.embed(texts)
    assert many.shape == (13, emb.dim) and many.dtype == np.float32
    one = np.concatenate([emb.embed([t]) for t in texts[:3]])
    assert np.allclose(many[:3], one, atol=1e-5)
    assert emb.embed([]).shape == (0, emb.dim)
    long = "word " * 5000
    assert len(clipped(long)) <= 2001
    assert np.isclose(np.linalg.norm(emb.embed([long])[0]), 1.0, atol=1e-4)


def test_the_model_loads_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights come from the installed package: with the hub marked offline and
    every socket connect refused, a fresh embedder loads and embeds."""
    import socket

    def refuse(*_: object, **__: object) -> None:
        raise OSError("network used while loading the embedding model")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    emb = UseEmbedder()
    assert not emb.loaded
    out = emb.embed(["离线也能加载", "loads offline"])
    assert emb.loaded and out.shape == (2, 512)
