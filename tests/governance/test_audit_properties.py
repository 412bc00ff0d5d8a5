"""Any single change to the stored lines is caught by verify."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.governance.audit.verify import verify

from .audit_helpers import KEY, build, lines, rewrite


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["delete", "swap", "duplicate", "edit", "truncate"]),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=10_000),
)
def test_any_single_tampering_is_detected(kind: str, a: int, b: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        build(path, 15, checkpoint_every=4)
        ls = lines(path)
        i = a % len(ls)
        if kind == "delete":
            del ls[i]
        elif kind == "swap":
            j = (i + 1 + b % (len(ls) - 1)) % len(ls)
            ls[i], ls[j] = ls[j], ls[i]
        elif kind == "duplicate":
            ls.insert(b % (len(ls) + 1), ls[i])
        elif kind == "edit":
            line = bytearray(ls[i])
            k = 1 + b % (len(line) - 3)  # never the braces or the newline
            line[k] = ord("Z") if line[k] != ord("Z") else ord("Y")
            ls[i] = bytes(line)
        else:
            ls = ls[: max(1, i)]
        rewrite(path, ls)
        result = verify(path, KEY)
        assert not result.ok
        assert result.reason
