"""Agent sessions: a request names its session and step; the ledger keeps each step.

Pure policy (values in, a decision out): naming and validating a session
(``ids``), the settings that apply to a tenant's app (``settings``), the session
budget as admission rules (``budget``), the tool-output growth policy
(``tool_output``) and the waterfall built from ledger rows (``waterfall``). The
shell, ``gateway/``, holds the step counters (in-process or Redis).
"""
