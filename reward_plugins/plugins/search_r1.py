"""Search-R1 QA rewards: exact match, substring match and token F1 on the ``<answer>`` span.

With default options every function here returns exactly what verl's
``verl.utils.reward_score.search_r1_like_qa_em`` function of the same name returns, for every
input verl accepts (verl 0.9.1; the module is unchanged since PR #1682):

- no ``<answer>...</answer>`` span: ``0`` (an int);
- the last span (stripped) matches a gold: ``score``; with more than ``max_answer_tags``
  opening or closing answer tags anywhere in the response, EM pays ``score * spam_factor``;
- otherwise ``format_score``.

SubEM applies no spam penalty unless ``penalize_subem=True``. Unlike verl nothing is printed,
every constant is an option, extraction is linear-time and more ground-truth shapes are accepted.

The router-facing scorers (``score_*``) return a dict with the fixed keys :data:`QA_RESULT_KEYS`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from reward_plugins.extract import (
    EXTRACT_MODES,
    ExtractMode,
    extract_tag,
    scan_tags,
)
from reward_plugins.groundtruth import Golds, coerce_golds
from reward_plugins.registry import register
from reward_plugins.text import normalize_squad

SEARCH_R1_DATA_SOURCES: tuple[str, ...] = tuple(
    f"searchR1_{name}"
    for name in ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
)

QA_RESULT_KEYS: tuple[str, ...] = (
    "score",
    "acc",
    "em",
    "subem",
    "f1",
    "answer_found",
    "answer_tags",
    "spam_penalized",
)
"""Keys of every QA scorer's dict result, on every call and every branch."""

DEFAULT_MAX_ANSWER_TAGS = 10
DEFAULT_SPAM_FACTOR = 0.25

normalize_answer = normalize_squad


def em_check(prediction: str, golden_answers: str | Iterable[str]) -> int:
    """1 if the normalized prediction equals any normalized gold, else 0 (verl's ``em_check``)."""
    golds = (golden_answers,) if isinstance(golden_answers, str) else golden_answers
    normalized = normalize_answer(prediction)
    return int(any(normalize_answer(gold) == normalized for gold in golds))


def subem_check(prediction: str, golden_answers: str | Iterable[str]) -> int:
    """1 if a normalized gold is a substring of the normalized prediction (``subem_check``)."""
    golds = (golden_answers,) if isinstance(golden_answers, str) else golden_answers
    normalized = normalize_answer(prediction)
    return int(any(normalize_answer(gold) in normalized for gold in golds))


def extract_solution(solution_str: str) -> str | None:
    """The stripped content of the last ``<answer>...</answer>`` span, or ``None``."""
    return extract_tag(solution_str, "answer", "last")


def count_answer_tags(text: str) -> tuple[int, int]:
    """``(count of "<answer>", count of "</answer>")`` over the whole text."""
    return text.count("<answer>"), text.count("</answer>")


class _GoldIndex(NamedTuple):
    """Normalized golds and what token F1 needs of them."""

    strings: tuple[str, ...]
    token_counts: tuple[dict[str, int], ...]
    vocabulary: frozenset[str]


_GOLD_CACHE_SIZE = 4096
_gold_cache: dict[Golds, _GoldIndex] = {}


def _gold_index(golds: Golds) -> _GoldIndex:
    """The normalized golds, computed once per ground truth (a GRPO group shares one).

    A plain dict emptied when full: cheaper per call than ``functools.lru_cache``.
    """
    index = _gold_cache.get(golds)
    if index is None:
        if len(_gold_cache) >= _GOLD_CACHE_SIZE:
            _gold_cache.clear()
        strings = tuple(normalize_answer(gold) for gold in golds)
        counts = tuple(Counter(gold.split()) for gold in strings)
        index = _gold_cache[golds] = _GoldIndex(
            strings, tuple(map(dict, counts)), frozenset().union(*counts)
        )
    return index


def _token_f1(prediction: str, golds: _GoldIndex) -> float:
    """Best SQuAD v1.1 token F1 of a normalized prediction over the golds.

    0.0 when no gold shares a token with it (so an empty prediction scores 0.0, as in SQuAD v1.1).
    """
    prediction_tokens = prediction.split()
    if golds.vocabulary.isdisjoint(prediction_tokens):
        return 0.0
    if prediction in golds.strings:
        return 1.0
    prediction_counts = Counter(prediction_tokens)
    best = 0.0
    for gold_counts in golds.token_counts:
        same = sum(min(n, gold_counts.get(token, 0)) for token, n in prediction_counts.items())
        if same:
            precision = 1.0 * same / len(prediction_tokens)
            recall = 1.0 * same / sum(gold_counts.values())
            best = max(best, (2 * precision * recall) / (precision + recall))
    return best


def _em(normalized: str, gold_strings: tuple[str, ...]) -> bool:
    return normalized in gold_strings


def _subem(normalized: str, gold_strings: tuple[str, ...]) -> bool:
    for gold in gold_strings:  # noqa: SIM110 (a loop is cheaper than any() over a generator)
        if gold in normalized:
            return True
    return False


class QAEvaluation(NamedTuple):
    """How one response compares with the golds, before any reward rule applies."""

    answer: str | None
    em: bool
    subem: bool
    f1: float
    answer_tags: int
    """The larger of the ``<answer>`` and ``</answer>`` counts."""


def evaluate(solution_str: str, golds: Golds, extract: ExtractMode) -> QAEvaluation:
    """Extract the answer, count the answer tags and compare with the golds every way."""
    answer, opening, closing = scan_tags(solution_str, "answer", extract)
    answer_tags = max(opening, closing)
    if answer is None:
        return QAEvaluation(None, False, False, 0.0, answer_tags)
    normalized = normalize_answer(answer)
    index = _gold_index(golds)
    return QAEvaluation(
        answer,
        _em(normalized, index.strings),
        _subem(normalized, index.strings),
        _token_f1(normalized, index),
        answer_tags,
    )


def _check_options(max_answer_tags: int, spam_factor: float, extract: str) -> None:
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {EXTRACT_MODES}, got {extract!r}")
    if type(max_answer_tags) is not int:
        raise TypeError(f"max_answer_tags must be an int, got {type(max_answer_tags).__name__}")
    if isinstance(spam_factor, bool) or not isinstance(spam_factor, (int, float)):
        raise TypeError(f"spam_factor must be a number, got {type(spam_factor).__name__}")


def _reward(
    answer: str | None,
    matched: bool,
    spammed: bool,
    format_score: Any,
    score: Any,
    spam_factor: float,
) -> tuple[Any, bool]:
    """verl's decision table: ``(reward, whether the spam penalty applied)``.

    No answer: ``0``; no match: ``format_score``; a match: ``score``, times ``spam_factor``
    when ``spammed`` (callers pass ``False`` where no penalty applies).
    """
    if answer is None:
        return 0, False
    if not matched:
        return format_score, False
    if spammed:
        return score * spam_factor, True
    return score, False


def _qa_result(evaluation: QAEvaluation, reward: Any, acc: bool, penalized: bool) -> dict[str, Any]:
    return {
        "score": float(reward),
        "acc": float(acc),
        "em": float(evaluation.em),
        "subem": float(evaluation.subem),
        "f1": evaluation.f1,
        "answer_found": float(evaluation.answer is not None),
        "answer_tags": evaluation.answer_tags,
        "spam_penalized": float(penalized),
    }


# ---------------------------------------------------------------------------- router scorers


@register("compute_score", SEARCH_R1_DATA_SOURCES)
def score_em(
    solution_str: str,
    golds: Golds,
    *,
    format_score: float = 0.0,
    score: float = 1.0,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """Exact-match reward with the anti-spam penalty; dict with :data:`QA_RESULT_KEYS`."""
    _check_options(max_answer_tags, spam_factor, extract)
    evaluation = evaluate(solution_str, golds, extract)
    spammed = evaluation.answer_tags > max_answer_tags
    reward, penalized = _reward(
        evaluation.answer, evaluation.em, spammed, format_score, score, spam_factor
    )
    return _qa_result(evaluation, reward, evaluation.em, penalized)


@register("compute_score_subem", SEARCH_R1_DATA_SOURCES)
def score_subem(
    solution_str: str,
    golds: Golds,
    *,
    format_score: float = 0.0,
    score: float = 1.0,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    penalize_subem: bool = False,
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """Substring-match reward (no spam penalty unless ``penalize_subem``); dict result."""
    _check_options(max_answer_tags, spam_factor, extract)
    evaluation = evaluate(solution_str, golds, extract)
    spammed = penalize_subem and evaluation.answer_tags > max_answer_tags
    reward, penalized = _reward(
        evaluation.answer, evaluation.subem, spammed, format_score, score, spam_factor
    )
    return _qa_result(evaluation, reward, evaluation.subem, penalized)


@register("compute_score_f1", SEARCH_R1_DATA_SOURCES)
def score_f1(
    solution_str: str,
    golds: Golds,
    *,
    format_score: float = 0.0,
    score: float = 1.0,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    extract: ExtractMode = "last",
) -> dict[str, Any]:
    """Token-F1 reward (R1-Searcher, ReSearch): ``score * F1``, ``format_score`` when F1 is 0.

    No answer gives 0; the spam penalty multiplies a positive F1 reward. ``acc`` is EM.
    """
    _check_options(max_answer_tags, spam_factor, extract)
    evaluation = evaluate(solution_str, golds, extract)
    spammed = evaluation.answer_tags > max_answer_tags
    reward, penalized = _reward(
        evaluation.answer,
        evaluation.f1 > 0,
        spammed,
        format_score,
        score * evaluation.f1,
        spam_factor,
    )
    return _qa_result(evaluation, reward, evaluation.em, penalized)


# ------------------------------------------------------------------ verl-compatible functions


def compute_score(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    *,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    extract: ExtractMode = "last",
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score``, configurable (``method`` unused, as in verl).

    Returns ``0`` without an answer, ``format_score`` on a wrong one, ``score`` on an exact match
    (``score * spam_factor`` when spammed).
    """
    return _verl_compatible(
        _em,
        solution_str,
        ground_truth,
        format_score,
        score,
        max_answer_tags,
        spam_factor,
        True,
        extract,
    )


def compute_score_subem(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    *,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    penalize_subem: bool = False,
    extract: ExtractMode = "last",
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score_subem``, configurable (``method`` unused)."""
    return _verl_compatible(
        _subem,
        solution_str,
        ground_truth,
        format_score,
        score,
        max_answer_tags,
        spam_factor,
        penalize_subem,
        extract,
    )


def _verl_compatible(
    match: Callable[[str, tuple[str, ...]], bool],
    solution_str: str,
    ground_truth: Any,
    format_score: Any,
    score: Any,
    max_answer_tags: int,
    spam_factor: float,
    penalize: bool,
    extract: ExtractMode,
) -> Any:
    """The lean path behind the verl-compatible functions: no F1, no result dict."""
    _check_options(max_answer_tags, spam_factor, extract)
    golds = coerce_golds(ground_truth)
    answer, opening, closing = scan_tags(solution_str, "answer", extract)
    matched = answer is not None and match(normalize_answer(answer), _gold_index(golds).strings)
    spammed = penalize and (opening > max_answer_tags or closing > max_answer_tags)
    return _reward(answer, matched, spammed, format_score, score, spam_factor)[0]
