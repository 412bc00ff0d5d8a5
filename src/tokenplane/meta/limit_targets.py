"""Whether a limit's target is in the directory (shared by the admin API and the CLI).

A limit for a tenant, department, app or key that does not exist would never apply
(or would apply by surprise to one created later under that name), so both ways of
writing limits refuse it. End users and model aliases are not in the directory and
are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.meta.directory import Directory
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import LimitTarget


@dataclass(frozen=True, slots=True)
class MissingTarget:
    """The first part of a target that is not in the directory: its field and why."""

    field: str
    message: str


def missing_target(target: LimitTarget, directory: Directory,
                   keys: KeyStore) -> MissingTarget | None:
    """None when every named tenant, department, app and (live) key exists."""
    tenant = target.tenant
    if not directory.has_tenant(tenant):
        return MissingTarget("tenant", f"No tenant '{tenant}'.")
    dept = target.department or None
    if dept is not None and not any(d["name"] == dept for d in directory.departments(tenant)):
        return MissingTarget("department", f"No department '{dept}' in tenant '{tenant}'.")
    if target.app and not any(a["name"] == target.app and a["department"] == dept
                              for a in directory.apps(tenant)):
        where = f"department '{dept}' of tenant '{tenant}'" if dept else f"tenant '{tenant}'"
        return MissingTarget("app", f"No app '{target.app}' in {where}.")
    if target.key_id and not any(k.id == target.key_id and k.revoked_at is None
                                 for k in keys.list_keys(tenant)):
        return MissingTarget("key_id", f"No active key '{target.key_id}' in tenant '{tenant}'.")
    return None
