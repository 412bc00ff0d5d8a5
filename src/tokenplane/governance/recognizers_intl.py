"""International recognizers: e-mail, phone numbers, payment cards, IBAN, IP addresses."""

from __future__ import annotations

import ipaddress

from tokenplane.governance.checksums import iban_ok, luhn_ok
from tokenplane.governance.cn_data import IBAN_LENGTHS
from tokenplane.governance.gate import Gate
from tokenplane.governance.pattern import ALNUM, DIGITS, PatternRecognizer, compile_pattern
from tokenplane.governance.spans import Recognizer, Span

_CARD_PREFIXES = (
    "4",  # Visa
    "51", "52", "53", "54", "55",  # Mastercard
    "34", "37",  # American Express
    "6011", "65", "644", "645", "646", "647", "648", "649",  # Discover
    "35",  # JCB
    "36", "300", "301", "302", "303", "304", "305", "38", "39",  # Diners
    "62",  # UnionPay
)  # fmt: skip


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def valid_email(value: str) -> bool:
    local, _, domain = value.rpartition("@")
    if not local or local[0] == "." or local[-1] == "." or ".." in value:
        return False
    labels = domain.split(".")
    return all(lbl and lbl[0] != "-" and lbl[-1] != "-" for lbl in labels) and labels[-1].isalpha()


def valid_card(value: str) -> bool:
    digits = _digits(value)
    if not 13 <= len(digits) <= 19 or not luhn_ok(digits):
        return False
    if len(set(digits)) == 1:
        return False
    if digits.startswith(("2",)):  # Mastercard 2221-2720
        return 2221 <= int(digits[:4]) <= 2720 and len(digits) == 16
    return digits.startswith(_CARD_PREFIXES)


def valid_iban(value: str) -> bool:
    compact = value.replace(" ", "")
    expected = IBAN_LENGTHS.get(compact[:2])
    if expected is not None and len(compact) != expected:
        return False
    return iban_ok(compact)


def valid_e164(value: str) -> bool:
    digits = _digits(value)
    return 8 <= len(digits) <= 15 and digits[0] != "0"


_NANP_SHAPE = compile_pattern(
    r"(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[2-9][0-9]{2}[ .\-][0-9]{4}"
)


def valid_nanp(value: str) -> bool:
    return _NANP_SHAPE.fullmatch(value) is not None


def valid_ipv4(value: str) -> bool:
    parts = value.split(".")
    return len(parts) == 4 and all(
        (p == "0" or not p.startswith("0")) and int(p) <= 255 for p in parts
    )


def valid_ipv6(value: str) -> bool:
    if value.count(":") < 2 or sum(1 for g in value.split(":") if g) < 2:
        return False
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    return True


class Ipv6Recognizer:
    """IPv6 addresses: finds colon pairs, grows them to the hex/colon token, validates."""

    name = "ipv6"
    entities = ("IP_ADDRESS",)
    score = 0.7
    # An address has "::" or at least three colons; clock times (12:30:45) have two.
    _finder = compile_pattern(r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")
    _token = frozenset("0123456789abcdefABCDEF:")
    _stop = frozenset(ALNUM)
    gate = Gate(_finder)  # every address contains a match of the finder

    def find(self, text: str) -> list[Span]:
        spans: list[Span] = []
        pos = 0
        n = len(text)
        while True:
            m = self._finder.search(text, pos)
            if m is None:
                return spans
            start, end = m.start(), m.end()
            while start > 0 and text[start - 1] in self._token:
                start -= 1
            while end < n and text[end] in self._token:
                end += 1
            pos = end
            ok_edges = (start == 0 or text[start - 1] not in self._stop) and (
                end == n or text[end] not in self._stop
            )
            if ok_edges and end - start <= 39 and valid_ipv6(text[start:end]):
                spans.append(Span(start, end, "IP_ADDRESS", self.score, self.name))


def intl_recognizers() -> list[Recognizer]:
    """The built-in international recognizers (Presidio-compatible entity names)."""
    return [
        PatternRecognizer(
            "email",
            "EMAIL_ADDRESS",
            compile_pattern(
                r"[A-Za-z0-9._%+\-]{1,64}@"
                r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,62}\.)+[A-Za-z]{2,24}(?![A-Za-z0-9\-])"
            ),
            0.9,
            valid_email,
            not_after=ALNUM + "._%+-",
            anchors=("@",),
            window=(64, 256),
        ),
        PatternRecognizer(
            "phone_e164",
            "PHONE_NUMBER",
            compile_pattern(r"\+[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,4}\)?){2,5}(?![0-9])"),
            0.7,
            valid_e164,
            not_after=ALNUM + "+",
            anchors=("+",),
            window=(0, 40),
        ),
        PatternRecognizer(
            "phone_nanp",
            "PHONE_NUMBER",
            compile_pattern(r"[(2-9][0-9]{2,3}\)?[ .\-]{0,2}[2-9][0-9]{2}[ .\-][0-9]{4}(?![0-9])"),
            0.6,
            valid_nanp,
            not_after=DIGITS + "+-.",
            context=("phone", "call", "tel", "mobile", "电话", "手机", "联系"),
            context_score=0.75,
        ),
        PatternRecognizer(
            "credit_card",
            "CREDIT_CARD",
            compile_pattern(
                r"[2-6](?:[0-9]{12,18}|[0-9]{3}[ \-][0-9]{4,6}[ \-][0-9]{4,5}"
                r"(?:[ \-][0-9]{1,4})?(?:[ \-][0-9]{1,3})?)(?![0-9])"
            ),
            0.8,
            valid_card,
            not_after=DIGITS,
        ),
        PatternRecognizer(
            "iban",
            "IBAN_CODE",
            compile_pattern(
                r"[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"
                r"(?![A-Za-z0-9])"
            ),
            0.9,
            valid_iban,
            not_after=ALNUM,
        ),
        PatternRecognizer(
            "ipv4",
            "IP_ADDRESS",
            compile_pattern(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])"),
            0.7,
            valid_ipv4,
            not_after=DIGITS + ".",
            prefilter=(".",),
        ),
        Ipv6Recognizer(),
    ]
