"""Prompt-injection screening: normalisation, heuristic rules, detectors and actions."""
