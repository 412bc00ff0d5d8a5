"""Tamper-evident audit log: hash chain, signed checkpoints, retention, search."""
