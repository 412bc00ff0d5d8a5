"""Service-level objectives: SLIs, error budgets and multi-window burn-rate alerts.

Pure policy: facts about requests and ``now`` in, verdicts, budgets and alert
decisions out. The gateway's evaluator, the CLI and the simulator run the same
objects (docs/SLO.md)."""
