"""Naming a session and step: headers, metadata, their checks, the metadata stripped."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.errors import GatewayError
from tokenplane.sessions.ids import SessionRef, session_ref, strip_metadata


def ref(headers: dict[str, str], body: dict[str, Any] | None = None) -> SessionRef | None:
    return session_ref(headers, body or {})


def test_headers_and_metadata_name_the_session() -> None:
    assert ref({}) is None
    assert ref({"x-tokenplane-session": "a.b:c-1_2"}) == SessionRef("a.b:c-1_2")
    assert ref({"x-tokenplane-session": "s", "x-tokenplane-step": "12"}) == SessionRef("s", 12)
    meta = {"metadata": {"tokenplane_session": "s", "tokenplane_step": "3"}}
    assert ref({}, meta) == SessionRef("s", 3)
    # both, agreeing
    assert ref({"x-tokenplane-session": "s", "x-tokenplane-step": "3"}, meta) == SessionRef("s", 3)
    assert ref({"x-tokenplane-session": "s" * 128}) == SessionRef("s" * 128)


@pytest.mark.parametrize(("headers", "meta", "param"), [
    ({"x-tokenplane-session": ""}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "-lead"}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "a/b"}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "s" * 129}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "s", "x-tokenplane-step": "1000001"}, None, "x-tokenplane-step"),
    ({"x-tokenplane-session": "s", "x-tokenplane-step": "１"}, None, "x-tokenplane-step"),
    ({"x-tokenplane-step": "1"}, None, "x-tokenplane-step"),
    ({}, {"tokenplane_step": "1"}, "metadata.tokenplane_step"),
    ({"x-tokenplane-session": "s", "x-tokenplane-step": "2"},
     {"tokenplane_session": "s", "tokenplane_step": "3"}, "metadata.tokenplane_step"),
])
def test_bad_names_are_400s_naming_the_field(headers: dict[str, str],
                                             meta: dict[str, str] | None, param: str) -> None:
    with pytest.raises(GatewayError) as err:
        ref(headers, {"metadata": meta} if meta is not None else {})
    assert err.value.status == 400 and err.value.param == param


def test_strip_metadata_keeps_the_clients_own_keys() -> None:
    body: dict[str, Any] = {"metadata": {"tokenplane_session": "s", "mine": "x"}}
    strip_metadata(body)
    assert body == {"metadata": {"mine": "x"}}
    body = {"metadata": {"tokenplane_session": "s", "tokenplane_step": "1"}}
    strip_metadata(body)
    assert body == {}
    untouched: dict[str, Any] = {"metadata": {"mine": "x"}}
    strip_metadata(untouched)
    assert untouched == {"metadata": {"mine": "x"}}
