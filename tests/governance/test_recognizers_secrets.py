from __future__ import annotations

import pytest

from tokenplane.governance.analyzer import Analyzer

ANALYZER = Analyzer()


def found(text: str) -> list[tuple[str, str]]:
    return [(s.entity_type, text[s.start : s.end]) for s in ANALYZER.analyze(text)]


def test_openai_style_key() -> None:
    key = "sk-proj-Abc123def456GHI789jkl012MNO345"
    assert found(f"key:{key}") == [("API_KEY", key)]
    assert found("密钥是" + key + "。") == [("API_KEY", key)]
    assert found("the task-sk-short is fine") == []


def test_aws_access_key() -> None:
    assert found("AWS AKIAIOSFODNN7EXAMPLE here") == [("AWS_ACCESS_KEY", "AKIAIOSFODNN7EXAMPLE")]
    assert found("XAKIAIOSFODNN7EXAMPLE") == []
    assert found("AKIAIOSFODNN7EXAMPL") == []


def test_jwt() -> None:
    jwt = (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    )
    assert found(f"Authorization: Bearer {jwt}") == [("JWT", jwt)]
    assert found("eyJhbGciOiJIUzI1NiJ9 alone") == []


def test_pem_private_key() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----"
    assert found(f"here:\n{pem}\nthanks") == [("PRIVATE_KEY", pem)]
    assert found("-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----") == []


@pytest.mark.parametrize(
    "text,value",
    [
        ("password: Tr0ub4dor&3xyz", "Tr0ub4dor&3xyz"),
        ("api_key=9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"),
        ("数据库密码是Xy7#kLm92pQ", "Xy7#kLm92pQ"),
        ("令牌：ZmFrZVRva2VuVmFsdWUxMjM", "ZmFrZVRva2VuVmFsdWUxMjM"),
        ('"secret": "aB3dE5gH7jK9"', "aB3dE5gH7jK9"),
    ],
)
def test_keyword_secrets(text: str, value: str) -> None:
    assert found(text) == [("SECRET", value)]


def test_keyword_secret_when_lowercasing_changes_length() -> None:
    # "İ".lower() is two characters: the recognizer falls back to IGNORECASE.
    text = "İstanbul PASSWORD: Xy7#kLm92pQ"
    assert found(text) == [("SECRET", "Xy7#kLm92pQ")]


@pytest.mark.parametrize(
    "text",
    [
        "password: hunter2",  # too short
        "the token count is 12345678",  # one character class, low entropy
        "Use the key: aaaaaaaaaaaa",
        "password reset emails are sent daily",
        "密钥管理很重要",
    ],
)
def test_keyword_secret_lookalikes(text: str) -> None:
    assert [e for e, _ in found(text) if e == "SECRET"] == []
