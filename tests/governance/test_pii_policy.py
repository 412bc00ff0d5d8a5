from __future__ import annotations

from typing import Any

import pytest

from tokenplane.errors import error_body
from tokenplane.governance.pii_messages import apply_messages
from tokenplane.governance.pii_policy import PiiAction, PiiBlocked, PiiPolicy, apply, redact
from tokenplane.governance.vault import Vault

from .factories import cn_id

ID = cn_id()


def test_actions_per_entity_type() -> None:
    policy = PiiPolicy(
        actions={
            "CN_ID_CARD": PiiAction.MASK,
            "CN_MOBILE": PiiAction.TOKENIZE,
            "EMAIL_ADDRESS": PiiAction.LOG,
            "IP_ADDRESS": PiiAction.ALLOW,
        }
    )
    vault = Vault()
    text = f"ID {ID} tel 13800138000 mail a@b.cn ip 10.0.0.1"
    out, findings = apply(text, policy, vault)
    assert out == "ID 110105********002X tel <CN_MOBILE_1> mail a@b.cn ip 10.0.0.1"
    assert [(f.entity_type, f.action) for f in findings] == [
        ("CN_ID_CARD", PiiAction.MASK),
        ("CN_MOBILE", PiiAction.TOKENIZE),
        ("EMAIL_ADDRESS", PiiAction.LOG),
    ]
    assert vault.restore(out).count("13800138000") == 1


def test_block_names_types_never_values() -> None:
    policy = PiiPolicy(actions={"CN_ID_CARD": PiiAction.BLOCK, "API_KEY": PiiAction.BLOCK})
    with pytest.raises(PiiBlocked) as info:
        apply(f"{ID} and sk-abcdefghijklmnopqrstuvwxyz", policy, Vault())
    err = info.value
    assert err.status == 400 and err.code == "pii_blocked"
    assert err.entity_types == ["API_KEY", "CN_ID_CARD"]
    assert ID not in err.message and "sk-" not in err.message
    assert b"CN_ID_CARD" in error_body(err)


def test_string_actions_are_enforced() -> None:
    policy = PiiPolicy(actions={"CN_ID_CARD": "block"}, default="log")  # type: ignore[dict-item,arg-type]
    with pytest.raises(PiiBlocked):
        apply(ID, policy, Vault())
    with pytest.raises(ValueError):
        PiiPolicy(default="shred")  # type: ignore[arg-type]


def test_no_findings_returns_text_unchanged() -> None:
    text = "nothing to see here, 你好"
    assert apply(text, PiiPolicy(), Vault()) == (text, [])


def test_from_config() -> None:
    policy = PiiPolicy.from_config(
        {
            "default": "log",
            "actions": {"CN_MOBILE": "tokenize"},
            "analyzer": {"custom": [{"entity_type": "EMP", "pattern": "EMP-[0-9]{4}"}]},
        }
    )
    out, findings = apply("EMP-1234 at 13800138000", policy, Vault())
    assert out == "EMP-1234 at <CN_MOBILE_1>"
    assert {f.entity_type for f in findings} == {"EMP", "CN_MOBILE"}
    with pytest.raises(ValueError):
        PiiPolicy.from_config({"default": "shred"})


def test_messages_string_and_parts_and_tool_results() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {
            "role": "user",
            "content": [{"type": "text", "text": f"my id {ID}"}, {"type": "image_url"}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"phone": "13800138000"}'},
    ]
    vault = Vault()
    out, found = apply_messages(messages, PiiPolicy(default=PiiAction.TOKENIZE), vault)
    assert out[1]["content"][0]["text"] == "my id <CN_ID_CARD_1>"
    assert out[1]["content"][1] == {"type": "image_url"}
    assert out[2]["content"] == '{"phone": "<CN_MOBILE_1>"}'
    assert [(m.index, m.part, m.role) for m in found] == [(1, 0, "user"), (2, None, "tool")]
    assert messages[1]["content"][0]["text"] == f"my id {ID}"  # input untouched


def test_messages_block_collects_all_types() -> None:
    messages = [{"role": "user", "content": ID}, {"role": "user", "content": "13800138000"}]
    with pytest.raises(PiiBlocked) as info:
        apply_messages(messages, PiiPolicy(default=PiiAction.BLOCK), Vault())
    assert info.value.entity_types == ["CN_ID_CARD", "CN_MOBILE"]


def test_redact_masks_everything_recognised() -> None:
    policy = PiiPolicy()
    assert redact(f"id {ID}, mail john@example.com", policy.analyzer) == (
        "id 110105********002X, mail j***@example.com"
    )
