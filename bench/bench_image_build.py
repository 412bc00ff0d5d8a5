"""How long scripts/build-image takes: cold (an empty cache: debootstrap, the base's
import, every layer), after a source change (the cache of the cold build; one line
added to a module), and with nothing changed. Each round builds from a copy of the
committed tree (``git archive HEAD``) into a cache of its own, which it deletes.

    python bench/bench_image_build.py --rounds 3 [--out bench/out/image_build.json]

Needs root, debootstrap and podman (as the build). Prints each round and the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _build(tree: Path, cache: Path) -> float:
    started = time.monotonic()
    subprocess.run([str(tree / "scripts/build-image"), "--cache", str(cache), "--tag",
                    "localhost/tokenplane:bench"], check=True, capture_output=True,
                   timeout=3600)
    return time.monotonic() - started


def one_round(base: Path) -> dict[str, float]:
    tree, cache = base / "tree", base / "cache"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    cold = _build(tree, cache)
    module = tree / "src/tokenplane/lru.py"
    module.write_text(module.read_text() + "\n# a change\n")
    changed = _build(tree, cache)
    unchanged = _build(tree, cache)
    return {"cold_s": cold, "source_change_s": changed, "unchanged_s": unchanged}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        base = Path(tempfile.mkdtemp(prefix="tp-image-bench-", dir="/var/tmp"))
        try:
            r = one_round(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        rounds.append(r)
        print(f"round {i + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in r.items()), flush=True)
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print("median: " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rounds": rounds, "median": medians}, indent=1))


if __name__ == "__main__":
    main()
