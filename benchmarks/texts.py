"""What the metric benchmarks share: synthetic English-like prose, its edited copies, and the
timing and reporting of a side-by-side row.

Words are made of syllables and drawn Zipf-distributed from a 5,000-word vocabulary; prose
capitalizes after a period and sprinkles numbers, commas and periods; an edited copy substitutes,
drops or follows with an inserted word about a third of the words.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

_SYLLABLES = ("ka", "lo", "mi", "ter", "son", "ra", "vin", "de", "al", "po", "us", "ne", "tri")


def _vocabulary(size: int) -> list[str]:
    rng = random.Random(0)
    words = {"".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(size * 2)}
    return sorted(words)[:size]


VOCABULARY = _vocabulary(5000)
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]


def prose(words: list[str], rng: random.Random, line_per_sentence: bool = False) -> str:
    """Words as prose: capitals after a period, some numbers, commas and periods; with
    ``line_per_sentence`` every sentence on a line of its own."""
    pieces: list[str] = []
    for word in words:
        if not pieces or pieces[-1].endswith("."):
            word = word.capitalize()
        if rng.random() < 0.04:
            word = str(rng.randint(1, 2000))
        if rng.random() < 0.08:
            word += ","
        elif rng.random() < 0.06:
            word += "."
        pieces.append(word)
    text = " ".join(pieces) + "."
    return text.replace(". ", ".\n") if line_per_sentence else text


def edited(words: list[str], draw: Callable[[], str], rng: random.Random) -> list[str]:
    """``words`` with about a third substituted, dropped or followed by an inserted word
    (``draw()`` gives the new words)."""
    result: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.12:
            result.append(draw())
        elif roll < 0.22:
            continue
        elif roll < 0.32:
            result += [word, draw()]
        else:
            result.append(word)
    return result


def seconds_per_case(
    scorers: Sequence[Callable[[Any], object]], cases: Callable[[int], list[Any]], repeats: int
) -> list[float]:
    """Per scorer, its fastest mean CPU time per case over ``repeats`` passes.

    Each pass makes fresh cases (``cases(seed)``) and lets every scorer score all of them in
    turn, the order rotating between passes.
    """
    best = [float("inf")] * len(scorers)
    for repeat in range(repeats):
        batch = cases(1000 + repeat)
        for step in range(len(scorers)):
            index = (step + repeat) % len(scorers)
            start = time.process_time()
            for case in batch:
                scorers[index](case)
            best[index] = min(best[index], (time.process_time() - start) / len(batch))
    return best


def report(label: str, reference_s: float, ours_s: float, goal: float, width: int = 46) -> None:
    """Print one side-by-side row with the goal's verdict."""
    ratio = reference_s / ours_s
    verdict = "met" if ratio >= goal else "MISSED"
    print(
        f"{label:<{width}} {reference_s * 1e3:10.3f} ms {ours_s * 1e3:9.3f} ms {ratio:7.1f}x"
        f"  (goal >= {goal:g}x: {verdict})"
    )
