"""Search-R1 rollouts for the benchmarks, in GRPO groups of 8 sharing one ground-truth object.

Two corpora (``make_rollouts(..., corpus=...)``):

``classic``: 2-5 KB responses, median 3.3 KB (2-3 think/search/information rounds of 3 docs).
Each group's ground truth is ``{"target": numpy object array}`` (as pandas reads parquet); gold
counts follow Search-R1's evaluation sets: NQ 1-3 answers, TriviaQA 2-12 aliases, PopQA 1-6,
HotpotQA one.

``wide`` (:func:`make_wide_rollouts`), not tuned to any scorer: 1 to 5 golds per question
(uniform); 5% of questions hold a degenerate gold that normalizes to ``""`` (``""``, ``"the"``,
``"a"``, ``" "``, ``"!!!"``); responses of 1 KB to 6 KB (a length drawn uniformly, reached with 1
to 5 rounds of think/search/information, 1 to 5 docs of varied length per round); ground-truth
shapes mixed: ``{"target": numpy object array}`` mostly, ``{"target": list}``, ``{"target": str}``
and a bare ``str`` (one-gold questions only). verl's ``compute_score`` reads
``ground_truth["target"]`` and so cannot take a bare string: the benchmark wraps it as
``{"target": str}`` for verl's functions only.

In both, about 40% of answers are correct (with case and punctuation variants), 45% wrong, 10%
missing, 5% spammed with 11-30 repeated answer tags.
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


def make_classic_rollouts(
    groups: int, seed: int, group_size: int = 8
) -> list[tuple[str, str, Any]]:
    """The ``classic`` corpus: ``groups * group_size`` rows of ``(data_source, solution_str,
    ground_truth)``."""
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


# ------------------------------------------------------------------------------ wide corpus

WIDE_SOURCES = (
    "searchR1_nq",
    "searchR1_triviaqa",
    "searchR1_popqa",
    "searchR1_hotpotqa",
    "searchR1_2wikimultihopqa",
    "searchR1_musique",
    "searchR1_bamboogle",
)
DEGENERATE_GOLDS = ("", "the", "a", " ", "!!!")
"""Golds that SQuAD-normalize to the empty string."""
MIN_BYTES, MAX_BYTES = 1024, 6144


_STREAM: list[str] = []


def _stream() -> str:
    """About 1.5 MB of prose built once per process (70% filler words, 25% syllable words):
    the wide corpus cuts its thinks and docs from it at random offsets, which is ten times
    cheaper than drawing each word."""
    if not _STREAM:
        rng = random.Random(20_240_601)
        vocabulary = sorted({_word(rng) for _ in range(6000)})
        words = [*_FILLER, *vocabulary]
        weights = [70 / len(_FILLER)] * len(_FILLER) + [25 / len(vocabulary)] * len(vocabulary)
        _STREAM.append(" ".join(rng.choices(words, weights, k=400_000)))
    return _STREAM[0]


def _prose_chars(rng: random.Random, chars: int, entities: list[str]) -> str:
    """About ``chars`` characters of prose (whole words) with an entity (golds among them) every
    20 words or so."""
    stream = _stream()
    inserted = [rng.choice(entities) for _ in range(round(chars / rng.uniform(60, 140)))]
    chars = max(chars - sum(len(entity) + 1 for entity in inserted), 3)
    start = stream.find(" ", rng.randrange(len(stream) - chars - 100)) + 1
    text = stream[start : stream.find(" ", start + chars)]
    for entity in inserted:
        cut = text.find(" ", rng.randrange(len(text)))
        if cut >= 0:
            text = f"{text[:cut]} {entity}{text[cut:]}"
    return text


def _answer_part(rng: random.Random, golds: list[str], kind: str) -> str:
    gold = rng.choice(golds)
    if kind == "correct":
        answer = rng.choice([gold, gold.lower(), f"the {gold}.", f" {gold}!"])
        return f"<answer> {answer} </answer>"
    if kind == "wrong":
        return f"<answer> {_entity(rng)} </answer>"
    if kind == "spam":
        return f"<answer>{gold}</answer>" * rng.randint(11, 30)
    return ""  # missing


def _wide_response(rng: random.Random, golds: list[str], kind: str) -> str:
    """A response of a length drawn uniformly in [MIN_BYTES, MAX_BYTES] (ASCII: chars = bytes)."""
    target = rng.randint(MIN_BYTES, MAX_BYTES)
    entities = [gold for gold in golds if gold.strip()] + [_entity(rng), _entity(rng)]
    answer = _answer_part(rng, golds, kind)
    aim = target
    for _ in range(8):  # words overshoot their share a little: aim lower until in range
        text = _build_response(rng, entities, answer, aim)
        if MIN_BYTES <= len(text) <= MAX_BYTES:
            return text
        aim -= len(text) - target
    raise AssertionError(f"no response of {target} bytes")


def _build_response(rng: random.Random, entities: list[str], answer: str, size: int) -> str:
    final_think = f"<think>{_prose_chars(rng, rng.randint(20, 200), entities)}</think>\n"
    budget = max(size - len(answer) - len(final_think), 200)
    rounds = max(1, min(rng.randint(1, 5), budget // 350))
    parts = []
    for share in _split(rng, budget, rounds):
        search = f"<search> {_prose_chars(rng, rng.randint(15, 60), entities)} </search>\n"
        think_size = int(share * rng.uniform(0.1, 0.4))
        think = f"<think>{_prose_chars(rng, think_size, entities)}</think>\n"
        doc_budget = share - len(think) - len(search) - len("<information></information>\n")
        docs = []
        for index, doc_size in enumerate(_split(rng, doc_budget, rng.randint(1, 5))):
            head = f'Doc {index + 1}(Title: "{_entity(rng)}") '
            docs.append(head + _prose_chars(rng, doc_size - len(head) - 1, entities))
        parts += [think, search, "<information>", "\n".join(docs), "</information>\n"]
    parts += [final_think, answer]
    return "".join(parts)


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` random shares (each at least 1/4 of an even share)."""
    weights = [rng.uniform(0.25, 1.75) for _ in range(parts)]
    scale = total / sum(weights)
    return [int(weight * scale) for weight in weights]


def make_wide_rollouts(groups: int, seed: int, group_size: int = 8) -> list[tuple[str, str, Any]]:
    """The ``wide`` corpus: ``groups * group_size`` rows of ``(data_source, solution_str,
    ground_truth)``; the rows of a group share one ground-truth object."""
    rng = random.Random(seed)
    rows = []
    for _ in range(groups):
        source = rng.choice(WIDE_SOURCES)
        golds = [_entity(rng) for _ in range(rng.randint(1, 5))]
        if rng.random() < 0.05:
            golds[rng.randrange(len(golds))] = rng.choice(DEGENERATE_GOLDS)
        shape = rng.random()
        if len(golds) == 1 and shape < 0.5:  # 1 question in 10: a string
            ground_truth: Any = golds[0] if shape < 0.2 else {"target": golds[0]}
        elif shape < 0.8:
            ground_truth = {"target": np.array(golds, dtype=object)}
        else:
            ground_truth = {"target": list(golds)}
        for _ in range(group_size):
            kind = rng.choices(["correct", "wrong", "missing", "spam"], [40, 45, 10, 5])[0]
            rows.append((source, _wide_response(rng, golds, kind), ground_truth))
    return rows


CORPORA = ("wide", "classic")


def make_rollouts(
    groups: int, seed: int, group_size: int = 8, corpus: str = "classic"
) -> list[tuple[str, str, Any]]:
    """``groups * group_size`` rows of ``(data_source, solution_str, ground_truth)`` of the
    ``classic`` (default) or the ``wide`` corpus."""
    if corpus == "classic":
        return make_classic_rollouts(groups, seed, group_size)
    if corpus == "wide":
        return make_wide_rollouts(groups, seed, group_size)
    raise ValueError(f"corpus must be one of {CORPORA}, got {corpus!r}")
