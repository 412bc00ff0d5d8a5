"""The optimisation advisor, as pure policy: aggregate rows of the ledger and the
prices in, findings out (docs/ADVICE.md).

Nothing here reads a database: ``advice/gateway`` fetches the aggregates (the
``advice_rollups`` and ``feedback`` tables) and hands them to :func:`advisor.advise`.
"""
