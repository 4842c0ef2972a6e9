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

Also here: the token-F1 reward (``compute_score_f1``), Search-R1's format-aware reward
(``compute_score_format``, from its ``qa_em_format.py``), and opt-in guards against known reward
hacks, shared by every QA scorer: ``normalizer`` (``squad`` or ``unicode``),
``subem_word_boundary``, ``max_answer_words`` and ``reject_empty_gold``. Each guard is off by
default, so the defaults keep verl's values.

The router-facing scorers (``score_*``) return a dict with the fixed keys :data:`QA_RESULT_KEYS`
(``compute_score_format`` adds :data:`FORMAT_RESULT_KEYS`). The decision table, the QA options
and the result shape are the QA core's (:mod:`reward_plugins.plugins.qa_core`), shared with
every QA-style scorer.

verl's call shapes of the same rewards (``compute_score(solution_str, ground_truth, method,
format_score, score)`` and the others) are :mod:`reward_plugins.plugins.verl_compat`'s,
re-exported here under verl's names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from reward_plugins.extract import extract_tag
from reward_plugins.groundtruth import Golds
from reward_plugins.plugins.qa_core import DEFAULT_MAX_ANSWER_TAGS as DEFAULT_MAX_ANSWER_TAGS
from reward_plugins.plugins.qa_core import DEFAULT_SPAM_FACTOR as DEFAULT_SPAM_FACTOR
from reward_plugins.plugins.qa_core import SEARCH_R1_DATA_SOURCES as SEARCH_R1_DATA_SOURCES
from reward_plugins.plugins.qa_core import (
    QAOptions,
    cached_metric,
    check_normalizer,
    qa_outcome,
    qa_result,
)
from reward_plugins.plugins.qa_core import retrieval_hit as retrieval_hit
from reward_plugins.plugins.qa_format import FormatOptions, format_outcome
from reward_plugins.plugins.verl_compat import compute_score as compute_score
from reward_plugins.plugins.verl_compat import compute_score_f1 as compute_score_f1
from reward_plugins.plugins.verl_compat import compute_score_format as compute_score_format
from reward_plugins.plugins.verl_compat import compute_score_subem as compute_score_subem
from reward_plugins.registry import scorer
from reward_plugins.results import ResultKey, Schema, keys_of
from reward_plugins.text import normalize_squad

QA_RESULTS: Schema = (
    ResultKey("score", "reward", "score", gdpo=True),
    ResultKey("acc", "component", "acc", gdpo=True),
    ResultKey("em", "component", "EM", gdpo=True),
    ResultKey("subem", "component", "SubEM", gdpo=True),
    ResultKey("f1", "component", "F1", gdpo=True),
    ResultKey("answer_found", "rate", "answer rate"),
    ResultKey("answer_tags", "count", "answer tags"),
    ResultKey("spam_penalized", "rate", "spam-penalized rate"),
)
"""The result schema of every QA scorer: ``acc`` is the paid match, ``answer_tags`` the larger
of the opening and closing answer-tag counts."""

QA_RESULT_KEYS: tuple[str, ...] = keys_of(QA_RESULTS)
"""Keys of every QA scorer's dict result, on every call and every branch."""

FORMAT_RESULTS: Schema = (
    *QA_RESULTS,
    ResultKey("format_valid", "component", "valid format", gdpo=True),
    ResultKey("retrieval_hit", "component", "retrieval hit", gdpo=True),
)
"""The result schema of ``compute_score_format``."""

FORMAT_RESULT_KEYS: tuple[str, ...] = keys_of(FORMAT_RESULTS)
"""Keys of ``compute_score_format``'s dict result."""

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


# ---------------------------------------------------------------------------- router scorers


@dataclass(frozen=True, kw_only=True)
class SubEMOptions(QAOptions):
    """The options of ``compute_score_subem``: the QA options and ``penalize_subem``."""

    penalize_subem: Annotated[bool, "apply the spam penalty to SubEM too (verl does not)"] = False


@dataclass(frozen=True, kw_only=True)
class MetricOptions(QAOptions):
    """The options of ``compute_score_metric``: the QA options and the metric."""

    metric: Annotated[str, "a metric of reward_plugins.metrics"]
    metric_options: Annotated[Mapping[str, Any] | None, "the metric's own options"] = None


@scorer(
    "compute_score",
    SEARCH_R1_DATA_SOURCES,
    validate=check_normalizer,
    results=QA_RESULTS,
    options=QAOptions,
)
def score_em(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Exact-match reward with the anti-spam penalty; dict with :data:`QA_RESULT_KEYS`.

    ``acc`` is the paid match: EM, within ``max_answer_words``.
    """
    outcome = qa_outcome("em", solution_str, golds, **options)
    return qa_result(outcome, outcome.paid_match)


@scorer(
    "compute_score_subem",
    SEARCH_R1_DATA_SOURCES,
    validate=check_normalizer,
    results=QA_RESULTS,
    options=SubEMOptions,
)
def score_subem(
    solution_str: str, golds: Golds, *, penalize_subem: bool = False, **options: Any
) -> dict[str, Any]:
    """Substring-match reward (spam penalty only with ``penalize_subem``); dict result.

    ``acc`` is the paid match: SubEM, within ``max_answer_words``.
    """
    outcome = qa_outcome("subem", solution_str, golds, penalize=penalize_subem, **options)
    return qa_result(outcome, outcome.paid_match)


@scorer(
    "compute_score_f1",
    SEARCH_R1_DATA_SOURCES,
    validate=check_normalizer,
    results=QA_RESULTS,
    options=QAOptions,
)
def score_f1(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Token-F1 reward (R1-Searcher, ReSearch): ``score * F1``, ``format_score`` when F1 is 0.

    No answer gives 0; the spam penalty multiplies a positive F1 reward. ``acc`` is EM
    (within ``max_answer_words``).
    """
    outcome = qa_outcome("f1", solution_str, golds, **options)
    comparison = outcome.comparison
    return qa_result(outcome, comparison.em and not comparison.too_long)


def _check_metric(options: Mapping[str, Any]) -> None:
    check_normalizer(options)
    cached_metric(options["metric"], options["metric_options"])


@scorer(
    "compute_score_metric",
    SEARCH_R1_DATA_SOURCES,
    validate=_check_metric,
    results=QA_RESULTS,
    options=MetricOptions,
)
def score_metric(
    solution_str: str,
    golds: Golds,
    *,
    metric: str,
    metric_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Any metric of :mod:`reward_plugins.metrics` as a reward on the answer span.

    ``score * metric(answer, golds)`` when the metric is positive (the spam penalty applies as
    for F1), ``format_score`` when it is 0, 0 without an answer. ``metric_options`` are the
    metric's own options, checked against it. Keys and ``acc`` as ``compute_score_f1``.
    """
    measure = cached_metric(metric, metric_options)
    outcome = qa_outcome("metric", solution_str, golds, metric=measure, **options)
    comparison = outcome.comparison
    return qa_result(outcome, comparison.em and not comparison.too_long)


# ``retrieval_hit``, a gold inside a retrieved block, is the QA core's: the tool scorer's too.


@scorer(
    "compute_score_format",
    SEARCH_R1_DATA_SOURCES,
    validate=check_normalizer,
    results=FORMAT_RESULTS,
    options=FormatOptions,
)
def score_format(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Search-R1's format-aware EM reward; dict with :data:`FORMAT_RESULT_KEYS`.

    ``acc`` is the paid EM; ``spam_penalized`` is always 0 (a repeated answer makes the format
    invalid instead).
    """
    outcome, valid, retrieval_hit = format_outcome(solution_str, golds, **options)
    result = qa_result(outcome, outcome.paid_match)
    result["format_valid"] = 1.0 if valid else 0.0
    result["retrieval_hit"] = 1.0 if retrieval_hit else 0.0
    return result
