"""The word memo's and the runs floor's per-word loops, compiled where they could be
built (``tokens/_words.c``, an optional extension built by ``pip install``,
docs/ARCHITECTURE.md "Compiled kernels"), else these pure-Python definitions, which
give the same results (``tests/tokens/test_word_kernels.py`` holds the two to each
other). ``TOKENPLANE_NO_KERNELS=1`` in the environment leaves the compiled ones out
(read when this module is first imported).

- ``later_sum(text, rest, last)``: the memoised counts of ``text.split(" ")[1:]`` summed
  (the pieces before the last from ``rest``, the last from ``rest`` else ``last``), None
  when one is missing (``tokens/word_counts.py``);
- ``runs_floor(text, above)``: ``space_splits.runs_floor(text)``, or with ``above >= 0``
  any floor that is over ``above`` exactly when that one is (the compiled one stops
  counting once it is over; this one counts a prefix first).
"""

from __future__ import annotations

import os

from tokenplane.tokens.space_splits import runs_floor as _runs

NO_KERNELS = "TOKENPLANE_NO_KERNELS"


def later_sum_py(text: str, rest: dict[str, int], last: dict[str, int], /) -> int | None:
    parts = text.split(" ")
    if len(parts) == 1:
        return 0
    try:
        n: int = sum(map(rest.__getitem__, parts[1:-1]))
        end = parts[-1]
        found = rest.get(end)
        return n + (found if found is not None else last[end])
    except KeyError:
        return None


def runs_floor_py(text: str, above: int, /) -> int:
    if above >= 0:
        # a prefix's runs are a floor too: enough text to be over ``above`` at about
        # four characters a run, before the whole
        cut = 4 * above + 64
        quick = _runs(text[:cut])
        if quick > above or len(text) <= cut:
            return quick
    return _runs(text)


try:
    if os.environ.get(NO_KERNELS):
        raise ImportError(NO_KERNELS)
    from tokenplane.tokens._words import later_sum as later_sum
    from tokenplane.tokens._words import runs_floor as runs_floor
    COMPILED = True
except ImportError:  # not built (no compiler at install), or left out on purpose
    later_sum, runs_floor = later_sum_py, runs_floor_py
    COMPILED = False
