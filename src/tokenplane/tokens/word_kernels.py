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
  counting once it is over; this one counts a prefix first);
- ``piece_runs(text, digits_one, above=-1)``: ``piece_floor.PieceFloor.tokens`` of ASCII
  text (its non-ASCII characters already mapped to their classes' ASCII ones), or with
  ``above >= 0`` any floor that is over ``above`` exactly when that one is (the compiled
  one stops counting once it is over: the count never falls as the text goes on; this
  one counts it all); compiled only,
  ``seen_piece_runs(text, seen, digits_one)`` of any text, its non-ASCII characters'
  classes read from ``seen`` (0 for a character of no known class, ``""``; a character
  ``seen`` lacks is answered, to be classified first).
"""

from __future__ import annotations

import os

import numpy as np

from tokenplane.tokens.space_splits import runs_floor as _runs

NO_KERNELS = "TOKENPLANE_NO_KERNELS"
LETTER, DIGIT, SPACE, OTHER = b"a", b"0", b" ", b"!"
# ASCII characters to their class (tokens/piece_floor.py)
CLASSES = bytes((LETTER if chr(c).isalpha() else DIGIT if chr(c).isdigit()
                 else SPACE if chr(c) in " \t\n\x0b\x0c\r" else OTHER)[0] for c in range(256))


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


def piece_runs_py(text: str, digits_one: bool, above: int = -1, /) -> int:
    cls = b" " + text.encode("ascii").translate(CLASSES)
    arr = np.frombuffer(cls, np.uint8)
    at = np.flatnonzero(arr[1:] != arr[:-1]) + 1  # where each run starts
    starts = arr[at]
    runs = len(starts) - int(np.count_nonzero(starts == SPACE[0]))
    if digits_one:  # every digit a piece of its own
        runs += cls.count(DIGIT) - int(np.count_nonzero(starts == DIGIT[0]))
    # a single other character right before a letter may lead the letter's piece
    led = int(np.count_nonzero((starts[:-1] == OTHER[0]) & (starts[1:] == LETTER[0])
                               & (at[1:] - at[:-1] == 1)))
    return runs - led


try:
    if os.environ.get(NO_KERNELS):
        raise ImportError(NO_KERNELS)
    from tokenplane.tokens._words import later_sum as later_sum
    from tokenplane.tokens._words import piece_runs as piece_runs
    from tokenplane.tokens._words import runs_floor as runs_floor
    from tokenplane.tokens._words import seen_piece_runs as _seen_piece_runs
    COMPILED = True
except ImportError:  # not built (no compiler at install), or left out on purpose
    later_sum, runs_floor, piece_runs = later_sum_py, runs_floor_py, piece_runs_py
    COMPILED = False


def seen_piece_runs(text: str, seen: dict[str, str], digits_one: bool) -> int | str:
    """See the module doc (compiled only)."""
    assert COMPILED
    return _seen_piece_runs(text, seen, digits_one)
