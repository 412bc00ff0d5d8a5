"""Recognizers for secrets: API keys, AWS keys, JWTs, PEM private keys, password-like tokens."""

from __future__ import annotations

import re

from tokenplane.governance.checksums import shannon_entropy
from tokenplane.governance.pattern import ALNUM, PatternRecognizer, compile_pattern

SECRET_WORDS = (
    "key", "token", "password", "passwd", "pwd", "secret", "credential", "bearer",
    "密钥", "令牌", "密码", "口令", "秘钥",
)  # fmt: skip

MIN_SECRET_ENTROPY = 3.0


def valid_secret_value(value: str) -> bool:
    """Long enough, mixes character classes and has enough entropy to be a credential."""
    if len(value) < 8:
        return False
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )
    return classes >= 2 and shannon_entropy(value) >= MIN_SECRET_ENTROPY


def valid_jwt(value: str) -> bool:
    return value.count(".") == 2


def secret_recognizers() -> list[PatternRecognizer]:
    """The built-in secret recognizers."""
    words = "|".join(re.escape(w) for w in SECRET_WORDS)
    return [
        PatternRecognizer(
            "openai_style_key",
            "API_KEY",
            compile_pattern(r"sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
            0.95,
            not_after=ALNUM + "_-",
            prefilter=("sk-",),
        ),
        PatternRecognizer(
            "github_token",
            "API_KEY",
            compile_pattern(r"gh[pousr]_[A-Za-z0-9]{36,}"),
            0.95,
            not_after=ALNUM + "_",
            prefilter=("gh",),
        ),
        PatternRecognizer(
            "aws_access_key",
            "AWS_ACCESS_KEY",
            compile_pattern(r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
            0.95,
            not_after=ALNUM,
            prefilter=("AKIA", "ASIA"),
        ),
        PatternRecognizer(
            "jwt",
            "JWT",
            compile_pattern(r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
            0.95,
            valid_jwt,
            not_after=ALNUM + "_-",
            prefilter=("eyJ",),
        ),
        PatternRecognizer(
            "pem_private_key",
            "PRIVATE_KEY",
            compile_pattern(
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
                r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            ),
            1.0,
            prefilter=("-----BEGIN",),
        ),
        PatternRecognizer(
            "keyword_secret",
            "SECRET",
            compile_pattern(
                r"(?:" + words + r")[A-Za-z_\-]{0,12}[\"']?\s*(?:[:=：]|是|为|is)\s*[\"']?"
                r"(?P<value>[A-Za-z0-9+/_\-.=!@#$%^&*~]{8,128})",
            ),
            0.8,
            valid_secret_value,
            group="value",
            match_lowered=True,
        ),
    ]
