"""Versioned ledger schema migrations for SQLite and PostgreSQL.

Each migration is ``(version, statements)``; a sink applies, at open, the ones its
``schema_migrations`` table does not list yet, each in the same transaction as its
bookkeeping row. Racing processes serialise on ``BEGIN IMMEDIATE`` (SQLite) or a
transaction-scoped advisory lock (PostgreSQL), so each migration runs exactly once.
Never edit a released migration: append a new one.
"""

from __future__ import annotations

Migration = tuple[int, tuple[str, ...]]

# Column types per dialect: (sqlite, postgres).
_T = {
    "text": ("TEXT", "text"),
    "text?": ("TEXT", "text"),
    "int": ("INTEGER", "bigint"),
    "real": ("REAL", "double precision"),
    "real?": ("REAL", "double precision"),
    "bool": ("INTEGER", "boolean"),
}

_EVENT_COLUMNS_V1: tuple[tuple[str, str], ...] = (
    ("request_id", "text"),
    ("attempt", "int"),
    ("ts", "real"),
    ("tenant", "text"),
    ("department", "text"),
    ("app", "text"),
    ("key_id", "text"),
    ("end_user", "text"),
    ("model", "text"),
    ("backend", "text"),
    ("response_model", "text"),
    ("operation", "text"),
    ("status", "text"),
    ("http_status", "int"),
    ("error_code", "text?"),
    ("stream", "bool"),
    ("arrival_ts", "real?"),
    ("upstream_start_ts", "real?"),
    ("first_token_ts", "real?"),
    ("last_token_ts", "real?"),
    ("input_system", "int"),
    ("input_history", "int"),
    ("input_context", "int"),
    ("input_tools", "int"),
    ("input_user", "int"),
    ("input_tokens", "int"),
    ("cached_input_tokens", "int"),
    ("cache_write_tokens", "int"),
    ("output_tokens", "int"),
    ("reasoning_tokens", "int"),
    ("estimated_input_tokens", "int"),
    ("usage_source", "text"),
    ("cost_micros", "int"),
    ("currency", "text"),
    ("price_version", "text"),
    ("flags", "text"),
    ("model_version", "text?"),
    ("system_fingerprint", "text?"),
)

_ROLLUP_MEASURES_V1 = (
    "requests",
    "errors",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
    "input_system",
    "input_history",
    "input_context",
    "input_tools",
    "input_user",
    "estimated_input_tokens",
    "cost_micros",
)


def _v1(dialect: int) -> tuple[str, ...]:
    def col(name: str, kind: str) -> str:
        null = "" if kind.endswith("?") else " NOT NULL"
        return f"{name} {_T[kind][dialect]}{null}"

    events = ",\n  ".join(col(n, k) for n, k in _EVENT_COLUMNS_V1)
    integer = _T["int"][dialect]
    real = _T["real"][dialect]
    measures = ",\n  ".join(f"{m} {integer} NOT NULL DEFAULT 0" for m in _ROLLUP_MEASURES_V1)
    return (
        f"CREATE TABLE usage_events (\n  {events},\n  PRIMARY KEY (request_id, attempt)\n)",
        "CREATE INDEX usage_events_ts ON usage_events (ts)",
        f"""CREATE TABLE usage_rollups (
  grain TEXT NOT NULL,
  bucket {integer} NOT NULL,
  tenant TEXT NOT NULL,
  department TEXT NOT NULL,
  app TEXT NOT NULL,
  model TEXT NOT NULL,
  key_id TEXT NOT NULL,
  currency TEXT NOT NULL,
  {measures},
  PRIMARY KEY (grain, bucket, tenant, department, app, model, key_id, currency)
)""",
        "CREATE INDEX usage_rollups_tenant ON usage_rollups (tenant, grain, bucket)",
        f"""CREATE TABLE system_fingerprints (
  tenant TEXT NOT NULL,
  app TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  requests {integer} NOT NULL DEFAULT 0,
  system_tokens {integer} NOT NULL DEFAULT 0,
  first_ts {real} NOT NULL,
  last_ts {real} NOT NULL,
  PRIMARY KEY (tenant, app, fingerprint)
)""",
        f"""CREATE TABLE price_versions (
  version TEXT PRIMARY KEY,
  currency TEXT NOT NULL,
  price_table TEXT NOT NULL,
  first_seen {real} NOT NULL
)""",
    )


# v2: the request's SLO class (SLO selectors, replay); NULL for events written before.
_EVENT_COLUMNS_V2: tuple[tuple[str, str], ...] = (("slo_class", "text?"),)


def _v2(dialect: int) -> tuple[str, ...]:
    return tuple(
        f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}"
        for name, kind in _EVENT_COLUMNS_V2
    )


def _v3(dialect: int) -> tuple[str, ...]:
    """Requests that never reached an upstream (refused by admission or a guard,
    cancelled while queued) are counted apart: ``refused`` and their prompt estimate
    ``refused_input_tokens``; ``estimated_input_tokens`` sums only requests that ran.
    Rows written before v3 are left as they were (their refused share is unknown once
    events are pruned)."""
    integer = _T["int"][dialect]
    return tuple(f"ALTER TABLE usage_rollups ADD COLUMN {m} {integer} NOT NULL DEFAULT 0"
                 for m in ("refused", "refused_input_tokens"))


# v4: the prompt's prefix fingerprints (replay): the router's chained segment hashes
# and their block counts, as JSON [[hash, blocks], ...]; NULL for events written before.
_EVENT_COLUMNS_V4: tuple[tuple[str, str], ...] = (("prefix_segments", "text?"),)


def _v4(dialect: int) -> tuple[str, ...]:
    return tuple(
        f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}"
        for name, kind in _EVENT_COLUMNS_V4
    )


# v5: RAG context packing and the overflow policy (docs/CONTEXT.md): the documents'
# tokens offered, kept and dropped (offered = kept + dropped), the dropped tokens and
# documents by reason as JSON {reason: {"documents": n, "tokens": t}}; the messages
# and prompt tokens history trimming dropped; the overflow action (trim_history,
# fallback) and, on a fallback, the alias asked for. Zero / NULL for events before.
_EVENT_COLUMNS_V5: tuple[tuple[str, str], ...] = (
    ("context_offered_tokens", "int"),
    ("context_kept_tokens", "int"),
    ("context_dropped_tokens", "int"),
    ("context_dropped", "text?"),
    ("history_dropped_messages", "int"),
    ("history_dropped_tokens", "int"),
    ("overflow", "text?"),
    ("overflow_from", "text?"),
)


def _v5(dialect: int) -> tuple[str, ...]:
    def col(name: str, kind: str) -> str:
        default = "" if kind.endswith("?") else " NOT NULL DEFAULT 0"
        return f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}{default}"
    return tuple(col(name, kind) for name, kind in _EVENT_COLUMNS_V5)


# v6: agent sessions (docs/SESSIONS.md): the session and step of each event, the tool
# calls of its answer and its tool-result tokens; and one rollup row per session, so
# that listing the costliest sessions reads no events.
_EVENT_COLUMNS_V6: tuple[tuple[str, str], ...] = (
    ("session_id", "text?"),
    ("session_step", "int?"),
    ("tool_calls", "int0"),
    ("tool_output_tokens", "int0"),
    ("tool_output_added", "int0"),
    ("tool_output_removed", "int0"),
)
_SESSION_MEASURES_V6: tuple[str, ...] = (
    "requests", "steps", "errors", "input_tokens", "output_tokens", "tool_output_added",
    "tool_calls", "cost_micros",
)


def _v6(dialect: int) -> tuple[str, ...]:
    integer, real = _T["int"][dialect], _T["real"][dialect]

    def col(kind: str) -> str:
        if kind == "int0":
            return f"{integer} NOT NULL DEFAULT 0"
        return integer if kind == "int?" else _T[kind][dialect]

    measures = ",\n  ".join(f"{m} {integer} NOT NULL DEFAULT 0" for m in _SESSION_MEASURES_V6)
    return (
        *(f"ALTER TABLE usage_events ADD COLUMN {name} {col(kind)}"
          for name, kind in _EVENT_COLUMNS_V6),
        "CREATE INDEX usage_events_session ON usage_events (session_id, tenant)",
        f"""CREATE TABLE session_rollups (
  tenant TEXT NOT NULL,
  session_id TEXT NOT NULL,
  currency TEXT NOT NULL,
  app TEXT NOT NULL,
  {measures},
  max_step {integer} NOT NULL DEFAULT 0,
  first_ts {real} NOT NULL,
  last_ts {real} NOT NULL,
  PRIMARY KEY (tenant, session_id, currency)
)""",
        "CREATE INDEX session_rollups_last ON session_rollups (last_ts)",
    )


# v7: response-cache hits (docs/CACHE.md): the cache kind (exact | semantic; NULL: not
# a hit), the request whose answer was served, and the tokens and list price saved.
# Events written before read as no hit and nothing saved.
_EVENT_COLUMNS_V7: tuple[tuple[str, str], ...] = (
    ("cache", "text?"),
    ("cache_source_request_id", "text?"),
    ("saved_input_tokens", "int"),
    ("saved_output_tokens", "int"),
    ("saved_cost_micros", "int"),
)


def _v7(dialect: int) -> tuple[str, ...]:
    def col(name: str, kind: str) -> str:
        default = "" if kind.endswith("?") else " NOT NULL DEFAULT 0"
        return f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}{default}"

    return (*(col(n, k) for n, k in _EVENT_COLUMNS_V7),
            "CREATE INDEX usage_events_cache ON usage_events (tenant, cache, ts)")


# v8: the SLIs' sealed one-minute counts (slo/minutes.py, docs/SLO.md): a restart
# reads them for the SLO window and the raw rows only since the last sealed minute.
# ``slo_key`` hashes what decides the verdicts (SLO name, selector, SLI kind and
# threshold); ``version`` is "" for the SLO's own counts, else a canary's version.
def _v8(dialect: int) -> tuple[str, ...]:
    integer, text = _T["int"][dialect], _T["text"][dialect]
    return (
        f"""CREATE TABLE slo_minutes (
  slo_key {text} NOT NULL,
  slo {text} NOT NULL,
  sli {text} NOT NULL,
  version {text} NOT NULL,
  minute {integer} NOT NULL,
  valid {integer} NOT NULL,
  bad {integer} NOT NULL,
  PRIMARY KEY (slo_key, version, minute)
)""",
        "CREATE INDEX slo_minutes_minute ON slo_minutes (minute)",
    )


# v9: the time a request waited at the gateway (the scheduler's queue), NULL for events
# written before or never queued; and the rollups per model version with latency sums
# (``metering/version_rollups.py``: the console's Versions page and latency per model).
_EVENT_COLUMNS_V9: tuple[tuple[str, str], ...] = (("queue_wait_s", "real?"),)


def _v9(dialect: int) -> tuple[str, ...]:
    integer = _T["int"][dialect]
    measures = ",\n  ".join(
        f"{m} {integer} NOT NULL DEFAULT 0"
        for m in ("requests", "errors", "input_tokens", "output_tokens", "cost_micros",
                  "timed", "queue_us", "gateway_us", "ttft_us", "decode_us"))
    return (
        *(f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}"
          for name, kind in _EVENT_COLUMNS_V9),
        f"""CREATE TABLE version_rollups (
  grain TEXT NOT NULL,
  bucket {integer} NOT NULL,
  tenant TEXT NOT NULL,
  department TEXT NOT NULL,
  app TEXT NOT NULL,
  model TEXT NOT NULL,
  model_version TEXT NOT NULL,
  currency TEXT NOT NULL,
  {measures},
  PRIMARY KEY (grain, bucket, tenant, department, app, model, model_version, currency)
)""",
        "CREATE INDEX version_rollups_tenant ON version_rollups (tenant, grain, bucket)",
    )


# v10: the optimisation advisor (docs/ADVICE.md): each answer's finish_reason; one
# rollup row per (day, tenant, app, alias, model version, template, currency) with the
# sums the advisor reads (advice_rollups, upserted with the events like usage_rollups);
# and the scores clients record with POST /v1/feedback (one per tenant and request).
_EVENT_COLUMNS_V10: tuple[tuple[str, str], ...] = (("finish_reason", "text?"),)
_ADVICE_MEASURES_V10: tuple[str, ...] = (
    "requests", "errors", "answers", "answer_output_tokens", "answer_output_sq",
    "length_finishes", "length_output_tokens", "input_tokens", "cached_input_tokens",
    "cache_write_tokens", "output_tokens", "input_system", "input_history",
    "input_context", "input_tools", "cost_micros", "context_offered_tokens",
    "context_kept_tokens", "history_dropped_tokens", "tool_output_tokens",
    "tool_output_removed",
)


def _v10(dialect: int) -> tuple[str, ...]:
    integer, real = _T["int"][dialect], _T["real"][dialect]
    measures = ",\n  ".join(f"{m} {integer} NOT NULL DEFAULT 0" for m in _ADVICE_MEASURES_V10)
    return (
        *(f"ALTER TABLE usage_events ADD COLUMN {name} {_T[kind][dialect]}"
          for name, kind in _EVENT_COLUMNS_V10),
        # keyed by day first, like usage_rollups: new rows land at the end of the key
        # (writes cost less than in a table clustered by the advisor's grouping, which
        # sums a window about twice as fast but costs the sink a third of its write
        # rate at high cardinality; docs/BENCHMARKS.md, "Optimisation advisor")
        f"""CREATE TABLE advice_rollups (
  bucket {integer} NOT NULL,
  tenant TEXT NOT NULL,
  app TEXT NOT NULL,
  model TEXT NOT NULL,
  version TEXT NOT NULL,
  template TEXT NOT NULL,
  currency TEXT NOT NULL,
  {measures},
  PRIMARY KEY (bucket, tenant, app, model, version, template, currency)
)""",
        "CREATE INDEX advice_rollups_tenant ON advice_rollups (tenant, bucket)",
        f"""CREATE TABLE feedback (
  tenant TEXT NOT NULL,
  request_id TEXT NOT NULL,
  app TEXT NOT NULL,
  model TEXT NOT NULL,
  version TEXT NOT NULL,
  key_id TEXT NOT NULL,
  score {real} NOT NULL,
  comment TEXT,
  labels TEXT NOT NULL,
  request_ts {real} NOT NULL,
  created_at {real} NOT NULL,
  PRIMARY KEY (tenant, request_id)
)""",
        "CREATE INDEX feedback_app ON feedback (tenant, app, model, request_ts)",
    )


# v11: the dialects (docs/MESSAGES.md): of cache_write_tokens, those written to a
# 1-hour prompt cache (priced apart from 5-minute writes), and the client that sent the
# request (its User-Agent's product: claude-cli, anthropic-python, openai-python, ...);
# and client_rollups, the traffic per day by operation (dialect) and client.
_EVENT_COLUMNS_V11: tuple[tuple[str, str], ...] = (
    ("cache_write_1h_tokens", "int0"),
    ("client", "text?"),
)
_CLIENT_MEASURES_V11: tuple[str, ...] = (
    "requests", "errors", "input_tokens", "cached_input_tokens", "cache_write_tokens",
    "output_tokens", "cost_micros",
)


def _v11(dialect: int) -> tuple[str, ...]:
    def col(name: str, kind: str) -> str:
        default = " NOT NULL DEFAULT 0" if kind == "int0" else ""
        return (f"ALTER TABLE usage_events ADD COLUMN {name} "
                f"{_T['int' if kind == 'int0' else kind][dialect]}{default}")
    integer = _T["int"][dialect]
    measures = ",\n  ".join(f"{m} {integer} NOT NULL DEFAULT 0" for m in _CLIENT_MEASURES_V11)
    return (
        *(col(n, k) for n, k in _EVENT_COLUMNS_V11),
        # per day x (tenant, app, operation, client, currency): the traffic of each wire
        # dialect and client (client "" when the request named none), upserted with the
        # events like the other rollups; keyed by day first, like advice_rollups
        f"""CREATE TABLE client_rollups (
  bucket {integer} NOT NULL,
  tenant TEXT NOT NULL,
  app TEXT NOT NULL,
  operation TEXT NOT NULL,
  client TEXT NOT NULL,
  currency TEXT NOT NULL,
  {measures},
  PRIMARY KEY (bucket, tenant, app, operation, client, currency)
)""",
        "CREATE INDEX client_rollups_tenant ON client_rollups (tenant, bucket)",
    )


def _v12(dialect: int) -> tuple[str, ...]:
    """What became of the requests that did not end ok, counted apart
    (``metering/outcomes.py``): ``limited`` (our 429s), ``client_errors`` (other 4xx),
    ``failures`` (5xx, timeouts, upstream 429s), ``cancelled``. Rows written before
    v12 keep 0 in each (only their ``errors`` and ``refused`` are known)."""
    integer = _T["int"][dialect]
    return tuple(f"ALTER TABLE usage_rollups ADD COLUMN {m} {integer} NOT NULL DEFAULT 0"
                 for m in ("limited", "client_errors", "failures", "cancelled"))


SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    (1, _v1(0)), (2, _v2(0)), (3, _v3(0)), (4, _v4(0)), (5, _v5(0)), (6, _v6(0)),
    (7, _v7(0)), (8, _v8(0)), (9, _v9(0)), (10, _v10(0)), (11, _v11(0)),
    (12, _v12(0)))
POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    (1, _v1(1)), (2, _v2(1)), (3, _v3(1)), (4, _v4(1)), (5, _v5(1)), (6, _v6(1)),
    (7, _v7(1)), (8, _v8(1)), (9, _v9(1)), (10, _v10(1)), (11, _v11(1)),
    (12, _v12(1)))

EVENT_TABLE_COLUMNS: tuple[str, ...] = tuple(
    n for n, _ in _EVENT_COLUMNS_V1 + _EVENT_COLUMNS_V2 + _EVENT_COLUMNS_V4
    + _EVENT_COLUMNS_V5 + _EVENT_COLUMNS_V6 + _EVENT_COLUMNS_V7 + _EVENT_COLUMNS_V9
    + _EVENT_COLUMNS_V10 + _EVENT_COLUMNS_V11
)

SCHEMA_MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)
