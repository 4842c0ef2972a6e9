"""``compute_score_f1``: SQuAD v1.1 token F1 of the extracted answer, best over the golds.

Reward rule: no answer -> 0; F1 == 0 -> ``format_score``; otherwise ``score * F1``, times
``spam_factor`` when the answer tags exceed ``max_answer_tags``. ``acc`` is exact match.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

import numpy as np
import pytest

import reward_plugins

ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = frozenset(string.punctuation)


def squad_normalize(text: str) -> str:
    """SQuAD v1.1 normalization (``normalize_answer`` of the official ``evaluate-v1.1.py``):
    lower, drop ASCII punctuation, replace the words a/an/the by spaces, collapse whitespace."""
    without_punctuation = "".join(c for c in text.lower() if c not in PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", without_punctuation).split())


def squad_f1(prediction: str, gold: str) -> float:
    """SQuAD v1.1 token F1: harmonic mean of token precision and recall over bag overlaps."""
    predicted = squad_normalize(prediction).split()
    expected = squad_normalize(gold).split()
    overlap = sum((Counter(predicted) & Counter(expected)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_f1(prediction: str, golds: list[str]) -> float:
    return max((squad_f1(prediction, gold) for gold in golds), default=0.0)


def f1_router(answer: str, golds: list[str], **options: float) -> dict:
    return reward_plugins.compute_score_f1(
        "searchR1_popqa", f"<answer>{answer}</answer>", {"target": golds}, **options
    )


# (answer, golds, F1 worked by hand, exact match)
HAND_WORKED: list[tuple[str, list[str], float, bool]] = [
    ("the Paris city", ["Paris"], 2 / 3, False),  # P = 1/2, R = 1
    ("Paris", ["Paris"], 1.0, True),
    ("New York", ["New York City"], 0.8, False),  # P = 1, R = 2/3
    ("York New", ["New York"], 1.0, False),  # a bag of words: F1 1, EM 0
    ("paris paris", ["paris"], 2 / 3, False),  # overlap counts min(2, 1) = 1
    ("New York City", ["New York", "NYC"], 0.8, False),  # best over the golds
    ("a b c d", ["b c x"], 2 / 3, False),  # "a" is an article: "b c d" vs "b c x"
    ("United States of America", ["U.S.A.", "United States"], 2 / 3, False),
    ("The Eiffel-Tower!", ["eiffel tower"], 0.0, False),  # "eiffeltower" is one token
    ("London", ["Paris"], 0.0, False),
    ("", ["Paris"], 0.0, False),
    ("", [""], 0.0, True),  # SQuAD v1.1: no shared token, F1 0, yet EM holds
    ("the", ["a"], 0.0, True),  # both normalize to ""
    ("北京 上海", ["北京"], 2 / 3, False),  # whitespace tokens only
    ("Paris", [], 0.0, False),  # empty target list
]


@pytest.mark.parametrize(("answer", "golds", "f1", "exact"), HAND_WORKED)
def test_hand_worked_f1(answer: str, golds: list[str], f1: float, exact: bool) -> None:
    assert best_f1(answer, golds) == pytest.approx(f1, abs=1e-12)  # the oracle agrees
    result = f1_router(answer, golds)
    assert result["f1"] == pytest.approx(f1, abs=1e-12)
    assert result["score"] == pytest.approx(f1, abs=1e-12)  # score 1, format_score 0
    assert (result["acc"], result["em"]) == (float(exact), float(exact))
    assert result["answer_found"] == 1.0


def test_no_answer_scores_zero() -> None:
    result = reward_plugins.compute_score_f1(
        "searchR1_nq", "Paris", {"target": ["Paris"]}, format_score=0.1
    )
    assert (result["score"], result["f1"], result["answer_found"]) == (0.0, 0.0, 0.0)


def test_zero_f1_gives_format_score_and_positive_f1_does_not_add_it() -> None:
    assert f1_router("London", ["Paris"], format_score=0.1)["score"] == 0.1
    assert f1_router("the", ["a"], format_score=0.1)["score"] == 0.1  # EM but F1 0
    assert f1_router("the Paris city", ["Paris"], format_score=0.1)["score"] == pytest.approx(2 / 3)
    assert f1_router("the Paris city", ["Paris"], score=2.0)["score"] == pytest.approx(4 / 3)


def test_spam_multiplies_positive_rewards_only() -> None:
    golds = {"target": ["Paris"]}
    partial = reward_plugins.compute_score_f1(
        "searchR1_nq", "<answer>the Paris city</answer>" * 11, golds
    )
    assert partial["score"] == pytest.approx(2 / 3 * 0.25)
    assert (partial["spam_penalized"], partial["answer_tags"]) == (1.0, 11)
    exact = reward_plugins.compute_score_f1("searchR1_nq", "<answer>Paris</answer>" * 11, golds)
    assert (exact["score"], exact["acc"], exact["spam_penalized"]) == (0.25, 1.0, 1.0)
    wrong = reward_plugins.compute_score_f1(
        "searchR1_nq", "<answer>London</answer>" * 11, golds, format_score=0.1
    )
    assert (wrong["score"], wrong["spam_penalized"]) == (0.1, 0.0)
    ten = reward_plugins.compute_score_f1("searchR1_nq", "<answer>Paris</answer>" * 10, golds)
    assert ten["score"] == 1.0


VOCABULARY = (
    "paris",
    "Paris",
    "PARIS!",
    "new",
    "york",
    "city",
    "the",
    "a",
    "an",
    "of",
    "u.s.",
    "it's",
    "-",
    "...",
    "北京",
    "café",
    "x",
)


def test_differential_against_squad_formula() -> None:
    """5,000 seeded answer/gold sets: the router's f1 and score equal the SQuAD v1.1 formula."""
    rng = np.random.default_rng(11)
    mismatches = []
    for _ in range(5000):
        answer = " ".join(rng.choice(VOCABULARY, size=rng.integers(0, 6)))
        golds = [
            " ".join(rng.choice(VOCABULARY, size=rng.integers(0, 4)))
            for _ in range(rng.integers(0, 4))
        ]
        expected = best_f1(answer, golds)
        result = f1_router(answer, golds, format_score=0.05)
        reward = expected if expected > 0 else 0.05
        exact = any(squad_normalize(answer) == squad_normalize(gold) for gold in golds)
        if not (
            math.isclose(result["f1"], expected, rel_tol=1e-12, abs_tol=1e-15)
            and math.isclose(result["score"], reward, rel_tol=1e-12)
            and result["acc"] == float(exact)
        ):
            mismatches.append((answer, golds, result, expected))
    assert mismatches == []
