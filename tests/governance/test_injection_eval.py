"""Precision and recall of the heuristic screen on the labelled set in tests/data.

Levels are documented in docs/GOVERNANCE.md. ``dev`` rows were written while the
rules were written; ``holdout1`` after rule set v1 and ``holdout2`` after v2 (each
then used to refine the rules); ``holdout3`` and ``holdout4`` after v3, the rules in
use, never used to tune them (only a normalisation bug holdout3 exposed was fixed).
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenplane.governance.injection.detector import HeuristicDetector, Source

DATA = Path(__file__).resolve().parents[1] / "data" / "injection_set.jsonl"
THRESHOLD = 0.5

# Asserted floors (see docs/GOVERNANCE.md for the measured values).
ALL_PRECISION, ALL_RECALL = 0.95, 0.75
FRESH_PRECISION, FRESH_RECALL = 0.85, 0.15  # holdout3 + holdout4


def _rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]


def _metrics(rows: list[dict[str, str]]) -> tuple[float, float, int, int]:
    detector = HeuristicDetector()
    tp = fp = fn = 0
    for row in rows:
        source: Source = row["source"]  # type: ignore[assignment]
        flagged = detector.score(row["text"], source).score >= THRESHOLD
        attack = row["label"] == "attack"
        tp += flagged and attack
        fp += flagged and not attack
        fn += attack and not flagged
    return tp / max(1, tp + fp), tp / max(1, tp + fn), tp + fn, len(rows) - tp - fn


def test_labelled_set_shape() -> None:
    rows = _rows()
    attacks = [r for r in rows if r["label"] == "attack"]
    benign = [r for r in rows if r["label"] == "benign"]
    assert len(attacks) >= 200 and len(benign) >= 200
    for lang in ("en", "zh"):
        assert any(r["lang"] == lang for r in attacks) and any(r["lang"] == lang for r in benign)
    assert {r["source"] for r in rows} == {"user", "context", "tool"}
    assert len({r["text"] for r in rows}) == len(rows)


def test_precision_and_recall() -> None:
    rows = _rows()
    report = {}
    for name, subset in [
        ("all", rows),
        ("en", [r for r in rows if r["lang"] == "en"]),
        ("zh", [r for r in rows if r["lang"] == "zh"]),
        ("indirect", [r for r in rows if r["source"] != "user"]),
        ("dev", [r for r in rows if r["split"] == "dev"]),
        ("holdout1", [r for r in rows if r["split"] == "holdout1"]),
        ("holdout2", [r for r in rows if r["split"] == "holdout2"]),
        ("holdout3", [r for r in rows if r["split"] == "holdout3"]),
        ("holdout4", [r for r in rows if r["split"] == "holdout4"]),
        ("fresh", [r for r in rows if r["split"] in ("holdout3", "holdout4")]),
    ]:
        p, r, pos, neg = _metrics(subset)
        report[name] = (p, r)
        print(
            f"injection screen [{name}] precision={p:.3f} recall={r:.3f}"
            f" (attacks={pos}, benign={neg})"
        )
    assert report["all"][0] >= ALL_PRECISION and report["all"][1] >= ALL_RECALL
    assert report["fresh"][0] >= FRESH_PRECISION and report["fresh"][1] >= FRESH_RECALL
