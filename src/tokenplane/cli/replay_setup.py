"""What ``tokenplane replay`` runs of a gateway config (``sim.replay.ReplaySetup``),
and the limits it enforces.

Limits do not live in the config file but in the metadata database
(``tokenplane limits``, ``/admin/v1/limits``). Replay starts from the limits the
gateway has there (``--home`` / ``--database-url``, the same place as the ledger; none
when there is no metadata database) and applies a limits file on top: ``--limits``
for the proposed config, ``--against-limits`` for the current one. A limits file is a
YAML list of entries, each a target (``tenant`` and optionally ``department``, ``app``,
``key_id``, ``user``, ``model``) and the fields ``tokenplane limits set`` takes
(``rpm``, ``tpm``, ``tokens_per_day``, ``budget``...), merged into that target's
limits exactly as ``tokenplane limits set`` merges them (``null`` removes a limit)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tokenplane.admission.binding import LimitTable
from tokenplane.admission.limits import LimitError, ScopeLimits
from tokenplane.config.schema import GatewayConfig
from tokenplane.meta.limit_store import LimitTarget, budget_micros, merge_limits
from tokenplane.metering.price_book import price_book
from tokenplane.scheduling.slo import slo_classes_from_config
from tokenplane.sim.cluster import ClusterConfig, PolicySpec
from tokenplane.sim.replay import ClassRules, ModelSetup, ReplaySetup
from tokenplane.sim.replay_admission import AdmissionSetup
from tokenplane.slo.protection import protect_spec
from tokenplane.slo.spec import slo_from_config

_TARGET_KEYS = ("tenant", "department", "app", "key_id", "user", "model")


def db_limits(home: Path, url: str | None) -> dict[LimitTarget, ScopeLimits]:
    """The limits the gateway enforces, from its metadata database (none when the data
    directory has no ``meta.db`` and no PostgreSQL URL is given)."""
    from tokenplane.meta.open_stores import open_limits

    if url is None and not (home / "meta.db").is_file():
        return {}
    store = open_limits(home, url)
    try:
        return {e.target: e.limits for e in store.entries()}
    finally:
        store.close()


def load_limit_changes(path: str) -> list[tuple[LimitTarget, dict[str, Any]]]:
    """A limits file (see the module doc): ``[(target, changes), ...]``."""
    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise LimitError(f"{path}: a limits file is a list of entries")
    out: list[tuple[LimitTarget, dict[str, Any]]] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not entry.get("tenant"):
            raise LimitError(f"{path}[{i}]: an entry is a mapping with a tenant")
        target = LimitTarget(*(str(entry[k]) if entry.get(k) else None
                               for k in _TARGET_KEYS))  # type: ignore[arg-type]
        changes = {k: v for k, v in entry.items() if k not in _TARGET_KEYS}
        if "budget" in changes:  # money, as `tokenplane limits set --budget`
            value = changes.pop("budget")
            changes["budget_micros"] = None if value is None else budget_micros(str(value))
        out.append((target, changes))
    return out


def limit_table(base: Mapping[LimitTarget, ScopeLimits],
                changes: Sequence[tuple[LimitTarget, dict[str, Any]]]) -> LimitTable:
    """``base`` with ``changes`` merged in, as the gateway's limit table."""
    merged = dict(base)
    for target, change in changes:
        try:
            merged[target] = merge_limits(merged.get(target), change)
        except LimitError as exc:
            raise LimitError(f"{target.scope().label}: {exc}") from None
    table = LimitTable()
    for target, spec in merged.items():
        table.set(target.scope(), spec)
    return table


def replay_setup(name: str, cfg: GatewayConfig, table: LimitTable, *,
                 replicas: int | None = None, engine_profile: str = "llama3-8b-a100",
                 seed: int = 0) -> ReplaySetup:
    """One config as replay runs it: per model alias as many simulated replicas as it
    has backend replicas (``replicas`` overrides), its routing profile (``routing.models`` or
    ``routing.profile``), the gateway queue when ``scheduling.enabled``, its SLO classes
    and how requests pick one, SLOs (with ``protect``), admission and prices."""
    classes = slo_classes_from_config(cfg.scheduling.class_specs())
    sch = cfg.scheduling
    models: dict[str, ModelSetup] = {}
    for m in cfg.models:
        profile = cfg.routing.models.get(m.alias, cfg.routing.profile)
        label = profile if isinstance(profile, str) else "custom"
        models[m.alias] = ModelSetup(
            m.alias,
            PolicySpec(label, profile, sch.enabled),
            ClusterConfig(
                replicas=replicas or sum(b.replicas for b in m.backends),
                max_waiting=sch.max_waiting,
                seed=seed, price_input_per_mtok=str(m.prices.input),
                price_output_per_mtok=str(m.prices.output),
                default_output_tokens=cfg.admission.default_output_tokens,
                prefix_index_blocks=cfg.routing.prefix_capacity_blocks,
                fast_decode=True, idle_ticks=False,  # a day of mostly quiet replicas
            ),
        )
    slos = [slo_from_config(s) for s in cfg.slos]
    protect = [protect_spec(s.name, s.protect, classes) for s in cfg.slos
               if s.protect is not None]
    prices = price_book(cfg.models)
    adm = cfg.admission
    return ReplaySetup(
        name=name, models=models, classes=classes,
        admission=AdmissionSetup(table, enabled=adm.enabled,
                                 default_output_tokens=adm.default_output_tokens,
                                 predict_output=adm.predict_output,
                                 ttl_s=adm.reservation_ttl_s, prices=prices),
        class_rules=ClassRules(sch.default_class, dict(sch.by_key), dict(sch.by_app),
                               dict(sch.by_tenant)),
        slos=slos, protect=protect, prices=prices, engine_profile=engine_profile,
    )
