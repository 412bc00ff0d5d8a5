"""tokenplane.metering: usage events, prices, the journal and the ledger.

The gateway builds a ``UsageEvent`` per upstream attempt and calls
``Meter.record(event)``; reports read the ledger's rollups. See ``docs/LEDGER.md``.
"""

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.meter import Meter, MeterStats
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.reports import (
    fingerprint_report,
    format_rows,
    parse_time_bound,
    token_source_report,
    top_consumers,
    usage_report,
)
from tokenplane.metering.retention import RetentionPolicy, prune
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink

__all__ = [
    "LedgerSink",
    "Meter",
    "MeterStats",
    "PriceBook",
    "RetentionPolicy",
    "UsageEvent",
    "fingerprint_report",
    "format_rows",
    "open_sink",
    "parse_time_bound",
    "prune",
    "token_source_report",
    "top_consumers",
    "usage_report",
]
