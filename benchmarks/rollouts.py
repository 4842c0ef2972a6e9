"""Realistic Search-R1 rollouts for the benchmarks: ~2.5 KB responses, GRPO groups of 8.

Each group shares one ground-truth object (as verl's ``DataProto.repeat`` makes it) whose
``target`` is a numpy object array (as pandas reads parquet). Gold counts follow the shape of
Search-R1's evaluation sets: NQ 1-3 answers, TriviaQA 2-12 aliases, PopQA 1-6, HotpotQA one.
About 40% of answers are correct (with case and punctuation variants), 45% wrong, 10% missing,
5% spammed with repeated answer tags.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

_SYLLABLES = "ka lo mi ren sa tor vel an dre is ol par ber lin mon ta ri gu ste".split()
_FILLER = (
    "the of and to in is was for on that with as by at from his her it an were which "
    "be this had are not or first new one also after who they two has been their its"
).split()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))


def _entity(rng: random.Random) -> str:
    return " ".join(_word(rng).capitalize() for _ in range(rng.randint(1, 3)))


def _prose(rng: random.Random, words: int, entities: list[str]) -> str:
    out = []
    for _ in range(words):
        roll = rng.random()
        if roll < 0.05:
            out.append(rng.choice(entities))
        else:
            out.append(_word(rng) if roll < 0.3 else rng.choice(_FILLER))
    return " ".join(out)


def _response(rng: random.Random, golds: list[str], kind: str) -> str:
    entities = [*golds, _entity(rng), _entity(rng)]
    parts = []
    for _ in range(rng.randint(2, 3)):
        parts.append(f"<think>{_prose(rng, rng.randint(40, 70), entities)}</think>\n")
        parts.append(f"<search> {_prose(rng, 6, entities)} </search>\n")
        docs = "\n".join(
            f'Doc {i + 1}(Title: "{_entity(rng)}") {_prose(rng, 45, entities)}' for i in range(3)
        )
        parts.append(f"<information>{docs}</information>\n")
    parts.append(f"<think>{_prose(rng, 30, entities)}</think>\n")
    gold = rng.choice(golds)
    if kind == "correct":
        answer = rng.choice([gold, gold.lower(), f"the {gold}.", f" {gold}!"])
        parts.append(f"<answer> {answer} </answer>")
    elif kind == "wrong":
        parts.append(f"<answer> {_entity(rng)} </answer>")
    elif kind == "spam":
        parts.append(f"<answer>{gold}</answer>" * rng.randint(11, 30))
    return "".join(parts)


def make_rollouts(groups: int, seed: int, group_size: int = 8) -> list[tuple[str, str, Any]]:
    """``groups * group_size`` rows of ``(data_source, solution_str, ground_truth)``."""
    rng = random.Random(seed)
    gold_counts = {
        "searchR1_nq": (1, 3),
        "searchR1_triviaqa": (2, 12),
        "searchR1_popqa": (1, 6),
        "searchR1_hotpotqa": (1, 1),
    }
    rows = []
    for _ in range(groups):
        source = rng.choice(list(gold_counts))
        golds = [_entity(rng) for _ in range(rng.randint(*gold_counts[source]))]
        ground_truth = {"target": np.array(golds, dtype=object)}
        for _ in range(group_size):
            kind = rng.choices(["correct", "wrong", "missing", "spam"], [40, 45, 10, 5])[0]
            rows.append((source, _response(rng, golds, kind), ground_truth))
    return rows
