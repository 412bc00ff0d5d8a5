"""Admission: budgets, rate limits and reservations that hold under concurrency.

Public API (see docs/ADMISSION.md): :class:`Admission` over a :class:`LimitTable`
and a :class:`CounterStore` (:class:`MemoryStore`, :class:`RedisStore`, wrapped by
:class:`ResilientStore` for the Redis-down policy).
"""

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.binding import BoundLimit, LimitTable
from tokenplane.admission.errors import denial_error, unavailable_error
from tokenplane.admission.headers import denial_headers, ratelimit_headers
from tokenplane.admission.limiter import Admission
from tokenplane.admission.limits import LimitError, LimitRule, ScopeLimits
from tokenplane.admission.outcomes import (
    Alert,
    DebitResult,
    Denial,
    Grant,
    Headroom,
    LimitStatus,
    Settlement,
)
from tokenplane.admission.periods import Period
from tokenplane.admission.planning import ReservationPlan, plan_reservation
from tokenplane.admission.scopes import Parties, Scope
from tokenplane.admission.stores.base import CounterStore, StoreUnavailable
from tokenplane.admission.stores.factory import make_store
from tokenplane.admission.stores.memory import MemoryStore
from tokenplane.admission.stores.redis import RedisStore
from tokenplane.admission.stores.resilient import ResilienceStats, ResilientStore

__all__ = [
    "Admission",
    "Alert",
    "Amounts",
    "BoundLimit",
    "CounterStore",
    "DebitResult",
    "Denial",
    "Grant",
    "Headroom",
    "LimitError",
    "LimitRule",
    "LimitStatus",
    "LimitTable",
    "MemoryStore",
    "Parties",
    "Period",
    "RedisStore",
    "ReservationPlan",
    "ResilienceStats",
    "ResilientStore",
    "Scope",
    "ScopeLimits",
    "Settlement",
    "StoreUnavailable",
    "denial_error",
    "denial_headers",
    "make_store",
    "plan_reservation",
    "ratelimit_headers",
    "unavailable_error",
]
