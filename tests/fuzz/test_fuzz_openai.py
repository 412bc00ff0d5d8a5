"""Fuzzing the OpenAI routes of a running gateway from its own ``/openapi.json``
(issue 13): bodies the document calls valid and bodies with a field of a wrong type,
with a tenant key and an admin key, over real sockets. No answer is a 5xx, every error
is in OpenAI's envelope with ``x-request-id``, the document's types are the
validators' (a body it calls valid is never refused for a type, a wrong type is
refused naming its field), and the gateway still serves afterwards."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.check import answer_ok
from tests.fuzz.conftest import MODEL, Fuzzed
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.schemas import field_paths, valid, wrongs

ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/context/pack"]
BASES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                             "max_tokens": 3},
    "/v1/completions": {"model": MODEL, "prompt": "hi", "max_tokens": 3},
    "/v1/embeddings": {"model": MODEL, "input": "hi"},
    "/v1/context/pack": {"model": MODEL, "documents": [{"id": "a", "text": "hi"}],
                         "budget_tokens": 50},
}
# codes a body the document calls valid may still get: rules between fields, the
# model's vocabulary and window, the alias, what governance and admission decide, an
# upstream's own refusal (relayed as 4xx)
_NOT_A_TYPE_ERROR = {"invalid_value", "missing_required", "context_length_exceeded",
                     "invalid_token_id", "model_not_found", "unsupported_value"}


def _send(fuzzed: Fuzzed, path: str, who: str, body: Any) -> Any:
    resp = fuzzed.client.post(path, json=body, headers=fuzzed.auth(who))
    return resp, answer_ok(resp, (who, path, body))


@pytest.mark.parametrize("path", ROUTES)
def test_valid_bodies_are_never_refused_for_a_type(fuzzed: Fuzzed, path: str) -> None:
    schema = fuzzed.body_schema(path)

    @fuzz_settings()
    @given(body=valid(schema), who=st.sampled_from(["tenant", "admin"]),
           real_model=st.integers(0, 4).map(bool))  # mostly the served alias
    def run(body: dict[str, Any], who: str, real_model: bool) -> None:
        if real_model:
            body = {**body, "model": MODEL}
        if "max_tokens" in body or "max_completion_tokens" in body:
            body = {**body, "max_tokens": min(body.get("max_tokens") or 8, 8),
                    "max_completion_tokens": None}
        resp, err = _send(fuzzed, path, who, body)
        if err is not None and resp.status_code == 400:
            assert err["code"] not in ("invalid_type", "unknown_parameter"), (body, err)
            if err["code"].startswith("invalid_"):
                assert err["code"] in _NOT_A_TYPE_ERROR, (body, err)

    run()
    fuzzed.still_serves()


@pytest.mark.parametrize("path", ROUTES)
def test_a_field_of_a_wrong_type_is_refused_naming_it(fuzzed: Fuzzed, path: str) -> None:
    schema = fuzzed.body_schema(path)
    names = sorted(schema["properties"])

    @fuzz_settings()
    @given(data=st.data(), who=st.sampled_from(["tenant", "admin"]))
    def run(data: st.DataObject, who: str) -> None:
        body = data.draw(valid(schema), "body")
        body = {**BASES[path], **{k: v for k, v in body.items() if k not in BASES[path]}}
        name = data.draw(st.sampled_from(names), "field")
        bad = data.draw(wrongs(schema["properties"][name]), "value")
        body[name] = bad
        resp, err = _send(fuzzed, path, who, body)
        assert resp.status_code == 400 and err is not None, (body, resp.text)
        assert err["param"] == name, (name, bad, err)
        assert err["code"] in ("invalid_type", "invalid_value"), err

    run()
    fuzzed.still_serves()


@pytest.mark.parametrize("path", ROUTES)
def test_every_field_in_the_document_is_validated(fuzzed: Fuzzed, path: str) -> None:
    """Each field the document lists, at any depth, set to a value of a wrong type:
    a 400 naming that field."""
    schema = fuzzed.body_schema(path)
    probes = list(field_paths(schema, BASES[path]))
    assert {p for p, _, _ in probes} >= set(schema["properties"])  # every field, nested too
    for param, body, union in probes:
        resp = fuzzed.client.post(path, json=body, headers=fuzzed.auth("tenant"))
        err = answer_ok(resp, body)
        assert resp.status_code == 400 and err is not None, (param, body, resp.text)
        assert err["param"] in (param, union), (param, body, err)
    fuzzed.still_serves()


_JUNK = st.one_of(
    st.binary(max_size=64),
    st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8)
                 | st.integers(), lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
    .map(lambda v: json.dumps(v).encode()),  # big integers and Infinity included
)


@pytest.mark.parametrize("path", ROUTES)
def test_junk_bodies(fuzzed: Fuzzed, path: str) -> None:
    @fuzz_settings(0.5)
    @given(raw=_JUNK, ctype=st.sampled_from([None, "application/json", "text/plain"]))
    def run(raw: bytes, ctype: str | None) -> None:
        headers = fuzzed.auth("tenant")
        if ctype is not None:
            headers["content-type"] = ctype
        resp = fuzzed.client.post(path, content=raw, headers=headers)
        err = answer_ok(resp, raw)
        assert err is not None and resp.status_code in (400, 415), (raw, resp.text)

    run()
    fuzzed.still_serves()
