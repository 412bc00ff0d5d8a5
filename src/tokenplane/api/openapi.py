"""The OpenAPI 3.1 document the gateway publishes at ``GET /openapi.json``.

The inference routes' request bodies are the operations' own field specs
(``Operation.body_spec()``, ``operations/schemas.py``): the document is built from the
objects that check the bodies, so it says exactly what the gateway accepts (fields it
does not list are forwarded unchecked). The admin routes' bodies are built from the
admin API's field tables (``api/admin.py``, ``api/admin_fields.py``), which also refuse
any field they do not list.
"""

from __future__ import annotations

from typing import Any

from tokenplane.api.admin import (
    APP_BODY,
    DEPARTMENT_BODY,
    KEY_BODY,
    LIMITS_BODY,
    PREFIX,
    TARGET_FIELDS,
    TENANT_BODY,
)
from tokenplane.api.admin_fields import LIMIT_TYPES, MAX_NAME_LEN, MAX_TEXT_LEN
from tokenplane.api.context_routes import PATH as PACK_PATH
from tokenplane.api.context_routes import body_spec as pack_spec
from tokenplane.api.feedback_routes import PATH as FEEDBACK_PATH
from tokenplane.api.feedback_routes import body_spec as feedback_spec
from tokenplane.api.messages_routes import PATH as COUNT_TOKENS_PATH
from tokenplane.auth.roles import ROLES
from tokenplane.governance.audit.multi import VERDICTS
from tokenplane.metering.reports import REPORT_DIMENSIONS
from tokenplane.operations.fields import nullable
from tokenplane.operations.registry import OperationRegistry

Schema = dict[str, Any]

_ERROR = {"$ref": "#/components/schemas/Error"}
_NAME: Schema = {"type": "string", "minLength": 1, "maxLength": MAX_NAME_LEN,
                 "description": "no control characters, no leading or trailing whitespace, "
                                "no '/'"}
_KEY_NAME: Schema = {"type": "string", "maxLength": MAX_NAME_LEN,
                     "description": "no control characters, no leading or trailing whitespace"}
_TEXT: Schema = {"type": "string", "maxLength": MAX_TEXT_LEN}
_LIMIT_SCHEMAS: dict[str, Schema] = {
    "int": {"type": "integer"},
    "str": {"type": "string"},
    "amount": {"anyOf": [{"type": "string"}, {"type": "number"}],
               "description": "an amount in the currency of the price book"},
    "numbers": {"type": "array", "items": {"type": "number"}},
}
# the type of each field of the admin request bodies
_ADMIN_FIELDS: dict[str, Schema] = {
    "name": _NAME, "department": nullable(_NAME), "app": nullable(_NAME),
    "admin": nullable({"type": "boolean"}),
    "role": nullable({"type": "string", "enum": list(ROLES)}),
    "expires_in": nullable({"type": "string",
                            "description": "the key's lifetime: 90d, 12h, 30m, 45s, 2w"}),
}


def _object(props: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    out: Schema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    return out


def _target() -> Schema:
    props = {f: _NAME if f == "tenant" else nullable(_NAME if f in ("department", "app")
                                                     else _TEXT) for f in TARGET_FIELDS}
    return _object(props, ("tenant",))


def _limits() -> Schema:
    return _object({f: nullable(_LIMIT_SCHEMAS[k]) for f, k in LIMIT_TYPES.items()})


def _admin_body(fields: tuple[str, ...]) -> Schema:
    special = {"target": _target(), "limits": _limits()}
    props = {f: special.get(f) or _ADMIN_FIELDS[f] for f in fields}
    if fields == KEY_BODY:
        props["name"] = nullable(_KEY_NAME)
    required = tuple(f for f in fields if f in ("name", "target", "limits")
                     and fields != KEY_BODY)
    return _object(props, required)


def _responses(*extra: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": "OK"}}
    for status in (400, 401, 403, 404, 409, 413, 415, 429, 503, *extra):
        out[str(status)] = {"description": "an error in OpenAI's envelope",
                            "content": {"application/json": {"schema": _ERROR}}}
    return out


def _body(schema: Schema) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _params(where: str, **params: Schema) -> list[dict[str, Any]]:
    return [{"name": n, "in": where, "required": where == "path", "schema": s}
            for n, s in params.items()]


def _op(summary: str, *, body: Schema | None = None, params: list[dict[str, Any]] | None = None,
        ok: int = 200) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": summary, "responses": _responses()}
    if ok != 200:
        out["responses"][str(ok)] = out["responses"].pop("200")
    if body is not None:
        out["requestBody"] = _body(body)
    if params:
        out["parameters"] = params
    return out


def _admin_paths() -> dict[str, Any]:
    t = _params("path", tenant={"type": "string"})
    time_q: Schema = {"type": "string", "description": "epoch seconds, ISO 8601, or a "
                                                        "relative time (-1h, -7d)"}
    fmt: Schema = {"type": "string", "enum": ["json", "csv"]}
    by: Schema = {"type": "string", "description": "comma-separated: "
                                                   + ", ".join(REPORT_DIMENSIONS)}
    report = _params("query", tenant={"type": "string"}, since=time_q, until=time_q,
                     format=fmt)
    target_q = _params("query", **{f: {"type": "string"} for f in TARGET_FIELDS})
    return {
        f"{PREFIX}/tenants": {
            "get": _op("list tenants"),
            "post": _op("create a tenant", body=_admin_body(TENANT_BODY), ok=201)},
        PREFIX + "/tenants/{tenant}": {"delete": _op("delete a tenant", params=t)},
        PREFIX + "/tenants/{tenant}/departments": {
            "get": _op("list departments", params=t),
            "post": _op("create a department", body=_admin_body(DEPARTMENT_BODY), params=t,
                        ok=201)},
        PREFIX + "/tenants/{tenant}/departments/{department}": {"delete": _op(
            "delete a department", params=t + _params("path", department={"type": "string"}))},
        PREFIX + "/tenants/{tenant}/apps": {
            "get": _op("list apps", params=t),
            "post": _op("create an app", body=_admin_body(APP_BODY), params=t, ok=201)},
        PREFIX + "/tenants/{tenant}/apps/{app}": {"delete": _op(
            "delete an app", params=t + _params("path", app={"type": "string"})
            + _params("query", department={"type": "string"}))},
        PREFIX + "/tenants/{tenant}/keys": {
            "get": _op("list keys", params=t),
            "post": _op("create a key", body=_admin_body(KEY_BODY), params=t, ok=201)},
        PREFIX + "/keys/{key_id}": {"delete": _op(
            "revoke a key", params=_params("path", key_id={"type": "string"}))},
        f"{PREFIX}/limits": {
            "get": _op("show limits", params=_params("query", tenant={"type": "string"})),
            "put": _op("set limits", body=_admin_body(LIMITS_BODY)),
            "delete": _op("delete limits", params=target_q)},
        PREFIX + "/tenants/{tenant}/budget": {"get": _op(
            "budget status (an admin key, or a key of this tenant)", params=t)},
        f"{PREFIX}/usage": {"get": _op("usage report", params=report
                                       + _params("query", by=by))},
        f"{PREFIX}/usage/sources": {"get": _op("token sources report", params=report)},
        f"{PREFIX}/usage/prompts": {"get": _op("repeated prompt prefixes", params=report
                                               + _params("query",
                                                         min_requests={"type": "integer"},
                                                         limit={"type": "integer"}))},
        f"{PREFIX}/usage/top": {"get": _op("top consumers", params=report + _params(
            "query", by=by, order={"type": "string", "enum": ["cost", "tokens"]},
            limit={"type": "integer", "minimum": 1, "maximum": 10_000}))},
        f"{PREFIX}/tools": {"get": _op(
            "MCP tool calls by tool (and app) from the audit log: calls, denials, result "
            "tokens, latency (docs/MCP.md)", params=_params(
                "query", since={"type": "string"}, until={"type": "string"},
                tenant={"type": "string"}, by_app={"type": "boolean"}))},
        f"{PREFIX}/usage/clients": {"get": _op(
            "requests, tokens and cost by API and client (day rollups)", params=report
            + _params("query", by={"type": "string", "description":
                                   "comma-separated: tenant, app"}))},
        f"{PREFIX}/sessions": {"get": _op("the costliest agent sessions", params=report
                                          + _params("query", order={
                                              "type": "string",
                                              "enum": ["cost", "tokens", "steps", "recent"]},
                                              limit={"type": "integer", "minimum": 1,
                                                     "maximum": 10_000}))},
        PREFIX + "/sessions/{session_id}": {"get": _op(
            "an agent session's per-step waterfall (a tenant's key: its own sessions)",
            params=_params("path", session_id={"type": "string"})
            + _params("query", tenant={"type": "string"}))},
        f"{PREFIX}/audit": {"get": _op("search audit records", params=_params(
            "query", tenant={"type": "string"}, key_id={"type": "string"},
            app={"type": "string"},
            verdict={"type": "string", "enum": list(VERDICTS)}, since=time_q, until=time_q,
            limit={"type": "integer", "minimum": 1, "maximum": 1000}))},
        f"{PREFIX}/advice": {"get": _op(
            "the optimisation advisor's findings (docs/ADVICE.md): evidence, saving per "
            "month in tokens and money, what to do (a tenant's key: its tenant); a kept "
            "document refreshed behind the answer (age_s, refreshing); Cache-Control: "
            "no-cache waits for one made after the request; wait=false: a 202 "
            "advice.pending instead of waiting for a document not computed yet",
            params=_params("query", tenant={"type": "string"}, since=time_q,
                           until=time_q, wait={"type": "boolean"}))},
        f"{PREFIX}/slos": {"get": _op(
            "SLOs: SLI, error budget left, burn rates, firing alerts (a tenant's key: the "
            "SLOs naming its tenant); canary guards for an admin key",
            params=_params("query", tenant={"type": "string"}))},
        f"{PREFIX}/cache": {"delete": _op(
            "drop a tenant's (or one app's) cached answers, exact and semantic (a "
            "tenant's key: its own tenant only)",
            params=_params("query", tenant={"type": "string"}, app={"type": "string"}))},
        f"{PREFIX}/autoscale": {"get": _op(
            "autoscaled pools (an admin key): replicas by phase, the last decision with "
            "its reasons and inputs, the measured demand, the recent decisions",
            params=_params("query", pool={"type": "string"},
                           limit={"type": "integer", "minimum": 1, "maximum": 10_000}))},
    }


def openapi_document(operations: OperationRegistry, version: str = "") -> dict[str, Any]:
    """The whole document: the inference routes of ``operations``, ``/v1/models`` and
    the admin API."""
    paths: dict[str, Any] = {}
    for op in operations:
        spec = op.body_spec()
        schema: Schema = spec.schema() if spec is not None else {"type": "object"}
        paths[op.path] = {"post": _op(f"{op.name} ({op.dialect.title})", body=schema)}
    paths["/v1/models"] = {"get": _op("the model aliases this key may use")}
    paths["/v1/models/{model}"] = {"get": _op("one model alias this key may use (404 if not)",
                                              params=_params("path", model={"type": "string"}))}
    paths[COUNT_TOKENS_PATH] = {"post": _op(
        "a Messages prompt's input tokens before it runs (Anthropic Messages; exact for "
        "self-hosted aliases, the backend's count for Anthropic backends)",
        body={"type": "object"})}
    paths[PACK_PATH] = {"post": _op("pack retrieved documents into a token budget with the "
                                    "model's tokenizer (docs/CONTEXT.md)",
                                    body=pack_spec().schema())}
    paths[FEEDBACK_PATH] = {"post": _op("score an answer by its x-request-id (0 to 1); "
                                        "the key must own the request's tenant",
                                        body=feedback_spec().schema())}
    paths.update(_admin_paths())
    return {
        "openapi": "3.1.0",
        "info": {"title": "tokenplane", "version": version or "0",
                 "description": "OpenAI-compatible inference routes and the admin API. "
                                "Inference bodies: fields not listed are forwarded to the "
                                "upstream unchecked; admin bodies accept only the fields "
                                "listed."},
        "paths": paths,
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": _object({"error": _object({
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": nullable({"type": "string"}), "code": nullable({"type": "string"}),
            }, ("message", "type", "param", "code"))}, ("error",))},
        },
    }
