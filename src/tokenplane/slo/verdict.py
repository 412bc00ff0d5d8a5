"""Which requests count for an SLI, and whether each was good.

An SLI is a ratio of good to valid events. The facts come from the usage event of a
request's last attempt (what the client finally got):

- availability: every request is valid except client mistakes (a 4xx), limit and
  budget refusals (the gateway's own 429s) and requests the client abandoned (499):
  those are not the service's doing. A valid request is bad when it ended in a
  gateway or upstream fault (a 5xx, a timeout, an upstream's 429).
- ttft, tpot, latency: only requests that succeeded are valid (failures are the
  availability SLI's to count, so one incident is not counted twice): ttft for
  streamed requests that produced a token, tpot for those with at least two output
  tokens, latency for non-stream requests. A valid request is good when its time is
  at or under the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tokenplane.slo.spec import Sli, SliKind


class Verdict(Enum):
    NOT_VALID = 0
    GOOD = 1
    BAD = 2


# The code of a 429 that the upstream sent (item 4's relayed errors): the service
# failing to serve, unlike a 429 from one of our limits.
UPSTREAM_RATE_LIMITED = "upstream_rate_limited"


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What an SLI needs to know about one finished request."""

    ts: float  # when it ended (epoch seconds)
    model: str
    tenant: str
    department: str
    app: str
    slo_class: str
    status: str  # ok | error | cancelled
    http_status: int
    error_code: str | None
    stream: bool
    ttft_s: float | None
    tpot_s: float | None
    latency_s: float | None
    version: str = ""  # the model version that served it (version splits)


def availability(f: RequestFacts) -> Verdict:
    code = f.http_status
    if f.status == "cancelled" or code == 499:
        return Verdict.NOT_VALID
    if code == 429:
        # a limit or budget of ours refused it, unless the upstream sent the 429
        return Verdict.BAD if f.error_code == UPSTREAM_RATE_LIMITED else Verdict.NOT_VALID
    if 400 <= code < 500:
        return Verdict.NOT_VALID  # the client's mistake
    if code >= 500 or f.status == "error":
        return Verdict.BAD
    return Verdict.GOOD


def _under(value: float | None, threshold: float | None) -> Verdict:
    if value is None or threshold is None:
        return Verdict.NOT_VALID
    return Verdict.GOOD if value <= threshold else Verdict.BAD


def judge(sli: Sli, f: RequestFacts) -> Verdict:
    if sli.kind is SliKind.AVAILABILITY:
        return availability(f)
    if f.status != "ok" or not 200 <= f.http_status < 300:
        return Verdict.NOT_VALID
    if sli.kind is SliKind.TTFT:
        return _under(f.ttft_s, sli.threshold_s) if f.stream else Verdict.NOT_VALID
    if sli.kind is SliKind.TPOT:
        return _under(f.tpot_s, sli.threshold_s)
    return Verdict.NOT_VALID if f.stream else _under(f.latency_s, sli.threshold_s)
