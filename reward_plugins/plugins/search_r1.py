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
(``compute_score_format`` adds :data:`FORMAT_RESULT_KEYS`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple

from reward_plugins.errors import InvalidOption
from reward_plugins.extract import ExtractMode, TagScan, extract_tag, find_tag_spans, scan_tags
from reward_plugins.groundtruth import Golds, coerce_golds
from reward_plugins.metrics import Metric, get_metric
from reward_plugins.metrics.qa import Comparison, compare, gold_index, subem_match
from reward_plugins.options import Factor, NonNegativeInt, PositiveInt, Score, freeze
from reward_plugins.plugins.trajectory import DEFAULT_END_MARKERS, TrajectoryTags, format_error
from reward_plugins.registry import Registration, lookup, scorer
from reward_plugins.results import ResultKey, Schema
from reward_plugins.text import NORMALIZERS, get_normalizer, normalize_squad

SEARCH_R1_DATA_SOURCES: tuple[str, ...] = tuple(
    f"searchR1_{name}"
    for name in ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
)

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

QA_RESULT_KEYS: tuple[str, ...] = tuple(item.key for item in QA_RESULTS)
"""Keys of every QA scorer's dict result, on every call and every branch."""

FORMAT_RESULTS: Schema = (
    *QA_RESULTS,
    ResultKey("format_valid", "component", "valid format", gdpo=True),
    ResultKey("retrieval_hit", "component", "retrieval hit", gdpo=True),
)
"""The result schema of ``compute_score_format``."""

FORMAT_RESULT_KEYS: tuple[str, ...] = tuple(item.key for item in FORMAT_RESULTS)
"""Keys of ``compute_score_format``'s dict result."""

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


# ------------------------------------------------------------------------------ the reward


class _Outcome(NamedTuple):
    reward: Any
    answer: str | None
    answer_tags: int
    comparison: Comparison
    paid_match: bool
    """A match was paid (not too long)."""
    penalized: bool


_build = tuple.__new__  # NamedTuple(...) without its Python-level __new__, on the hot path


def _penalize(score: Any, spam_factor: float) -> Any:
    """``score * spam_factor``; at the default factor ``score / 4`` exactly as verl computes it,
    which keeps the type of a ``Fraction`` or ``Decimal`` score."""
    return score / 4 if spam_factor == DEFAULT_SPAM_FACTOR else score * spam_factor


def _qa_outcome(
    rule: str,
    solution_str: str,
    golds: Golds,
    *,
    format_score: Score = 0.0,
    score: Score = 1.0,
    max_answer_tags: PositiveInt = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: Factor = DEFAULT_SPAM_FACTOR,
    extract: ExtractMode = "last",
    normalizer: str = "squad",
    subem_word_boundary: bool = False,
    max_answer_words: NonNegativeInt | None = None,
    reject_empty_gold: bool = False,
    penalize: bool = True,
    with_f1: bool = True,
    metric: Metric | None = None,
    scan: TagScan | None = None,
) -> _Outcome:
    """The outcome of one response under the QA options (their defaults are verl's): verl's
    decision table, for any match rule.

    No answer: ``0``. A match that is not ``too_long``: ``score`` (times F1 for ``"f1"``, times
    ``metric(answer, golds)`` for ``"metric"``), times ``spam_factor`` when ``penalize`` and the
    response has more than ``max_answer_tags`` opening or closing answer tags. Otherwise
    ``format_score``. ``rule`` is ``"em"``, ``"subem"``, ``"f1"`` or ``"metric"``; the options
    after ``reject_empty_gold`` are set by the scorers, not by users: ``scan`` is the answer and
    the tag counts when the scorer found them itself (else :func:`scan_tags` reads them).
    """
    answer, opening, closing = scan_tags(solution_str, "answer", extract) if scan is None else scan
    comparison = compare(
        answer,
        golds,
        normalizer,
        subem_word_boundary,
        max_answer_words,
        reject_empty_gold,
        with_f1 or rule == "f1",
    )
    answer_tags = opening if opening > closing else closing
    if answer is None:
        return _build(_Outcome, (0, None, answer_tags, comparison, False, False))
    if rule == "em":
        matched, paid = comparison.em, score
    elif rule == "subem":
        matched, paid = comparison.subem, score
    elif rule == "f1":
        matched, paid = comparison.f1 > 0, score * comparison.f1
    else:
        value = metric(answer, golds) if golds and metric else 0.0
        matched, paid = value > 0, score * value
    if not matched or comparison.too_long:
        return _build(_Outcome, (format_score, answer, answer_tags, comparison, False, False))
    if penalize and answer_tags > max_answer_tags:
        penalized = _penalize(paid, spam_factor)
        return _build(_Outcome, (penalized, answer, answer_tags, comparison, True, True))
    return _build(_Outcome, (paid, answer, answer_tags, comparison, True, False))


def _qa_result(outcome: _Outcome, acc: bool) -> dict[str, Any]:
    comparison = outcome.comparison
    # Conditional constants rather than float(bool): this runs once per sample.
    return {
        "score": float(outcome.reward),
        "acc": 1.0 if acc else 0.0,
        "em": 1.0 if comparison.em else 0.0,
        "subem": 1.0 if comparison.subem else 0.0,
        "f1": comparison.f1,
        "answer_found": 0.0 if outcome.answer is None else 1.0,
        "answer_tags": outcome.answer_tags,
        "spam_penalized": 1.0 if outcome.penalized else 0.0,
    }


def _check_normalizer(options: Mapping[str, Any]) -> None:
    if options["normalizer"] not in NORMALIZERS:
        raise InvalidOption(
            f"option 'normalizer' must be one of {', '.join(map(repr, sorted(NORMALIZERS)))}, "
            f"got {options['normalizer']!r}"
        )


def _options_of(function: Callable[..., Any], *, drop: tuple[str, ...] = ()) -> list[Any]:
    """The user-facing keyword-only parameters of ``function`` (annotations resolved)."""
    return [
        parameter
        for parameter in inspect.signature(function, eval_str=True).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name not in drop
    ]


_QA_PARAMETERS = _options_of(_qa_outcome, drop=("penalize", "with_f1", "metric", "scan"))
"""The QA options, declared once on :func:`_qa_outcome`; the QA scorers take exactly these."""


def _with_options(*extra: inspect.Parameter, base: list[Any] = _QA_PARAMETERS) -> Any:
    """Give a ``(solution_str, golds, **options)`` scorer the signature the registry reads its
    options from: ``base`` parameters then ``extra``."""
    positional = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for n in ("solution_str", "golds")
    ]

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        function.__signature__ = inspect.Signature([*positional, *base, *extra])  # type: ignore[attr-defined]
        return function

    return decorate


def _keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


# ---------------------------------------------------------------------------- router scorers


@scorer("compute_score", SEARCH_R1_DATA_SOURCES, validate=_check_normalizer, results=QA_RESULTS)
@_with_options()
def score_em(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Exact-match reward with the anti-spam penalty; dict with :data:`QA_RESULT_KEYS`.

    ``acc`` is the paid match: EM, within ``max_answer_words``.
    """
    outcome = _qa_outcome("em", solution_str, golds, **options)
    return _qa_result(outcome, outcome.paid_match)


@scorer(
    "compute_score_subem", SEARCH_R1_DATA_SOURCES, validate=_check_normalizer, results=QA_RESULTS
)
@_with_options(_keyword("penalize_subem", False, bool))
def score_subem(
    solution_str: str, golds: Golds, *, penalize_subem: bool = False, **options: Any
) -> dict[str, Any]:
    """Substring-match reward (spam penalty only with ``penalize_subem``); dict result.

    ``acc`` is the paid match: SubEM, within ``max_answer_words``.
    """
    outcome = _qa_outcome("subem", solution_str, golds, penalize=penalize_subem, **options)
    return _qa_result(outcome, outcome.paid_match)


@scorer("compute_score_f1", SEARCH_R1_DATA_SOURCES, validate=_check_normalizer, results=QA_RESULTS)
@_with_options()
def score_f1(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Token-F1 reward (R1-Searcher, ReSearch): ``score * F1``, ``format_score`` when F1 is 0.

    No answer gives 0; the spam penalty multiplies a positive F1 reward. ``acc`` is EM
    (within ``max_answer_words``).
    """
    outcome = _qa_outcome("f1", solution_str, golds, **options)
    comparison = outcome.comparison
    return _qa_result(outcome, comparison.em and not comparison.too_long)


_metrics: dict[Any, Metric] = {}
"""Built metrics by name and option set: built (and checked) once, as the registry binds."""


def _metric(name: str, options: Mapping[str, Any] | None) -> Metric:
    key = (name, freeze(options or {}))
    metric = _metrics.get(key)
    if metric is None:
        if len(_metrics) >= 256:
            _metrics.clear()
        metric = _metrics[key] = get_metric(name, **(options or {}))
    return metric


def _check_metric(options: Mapping[str, Any]) -> None:
    _check_normalizer(options)
    _metric(options["metric"], options["metric_options"])


@scorer("compute_score_metric", SEARCH_R1_DATA_SOURCES, validate=_check_metric, results=QA_RESULTS)
@_with_options(
    _keyword("metric", inspect.Parameter.empty, str),
    _keyword("metric_options", None, Mapping[str, Any] | None),
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
    measure = _metric(metric, metric_options)
    outcome = _qa_outcome("metric", solution_str, golds, metric=measure, **options)
    comparison = outcome.comparison
    return _qa_result(outcome, comparison.em and not comparison.too_long)


def _format_outcome(
    solution_str: str,
    golds: Golds,
    *,
    structure_format_score: Score = 0,
    final_format_score: Score = 0,
    retrieval_score: Score = 0,
    score: Score = 1.0,
    prompt_included: bool = False,
    end_markers: tuple[str, ...] = DEFAULT_END_MARKERS,
    think_tag: str = "think",
    search_tag: str = "search",
    information_tag: str = "information",
    answer_tag: str = "answer",
    normalizer: str = "squad",
    subem_word_boundary: bool = False,
    max_answer_words: NonNegativeInt | None = None,
    reject_empty_gold: bool = False,
) -> tuple[_Outcome, bool, bool]:
    """Search-R1's ``qa_em_format.compute_score_em`` decision table; the format options.

    With s, f, r, S the structure, final-format and retrieval scores and ``score``: a valid
    format pays S for a correct answer and s for a wrong or absent one (s + r when a normalized
    gold is a substring of a normalized information block); an invalid one pays S - s for a
    correct answer, f for a wrong one and 0 without an answer.

    Returns:
        ``(outcome, format_valid, retrieval_hit)``.
    """
    tags = TrajectoryTags(think_tag, search_tag, information_tag, answer_tag)
    valid = (
        format_error(
            solution_str, tags, prompt_included=prompt_included, end_markers=tuple(end_markers)
        )
        is None
    )
    if prompt_included:  # upstream: the prompt's example answer is the first match
        spans = find_tag_spans(solution_str, answer_tag)
        answer = spans[-1].strip() if len(spans) >= 2 else None
        tag_counts = (solution_str.count(f"<{answer_tag}>"), solution_str.count(f"</{answer_tag}>"))
    else:
        answer, opening, closing = scan_tags(solution_str, answer_tag, "last")
        tag_counts = (opening, closing)
    comparison = compare(
        answer,
        golds,
        normalizer=normalizer,
        subem_word_boundary=subem_word_boundary,
        max_answer_words=max_answer_words,
        reject_empty_gold=reject_empty_gold,
    )
    hit = valid and retrieval_hit(
        find_tag_spans(solution_str, information_tag),
        golds,
        normalizer,
        subem_word_boundary,
        reject_empty_gold,
    )
    correct = answer is not None and comparison.em and not comparison.too_long
    if correct:
        reward = score if valid else score - structure_format_score
    elif valid and hit:
        reward = structure_format_score + retrieval_score
    elif valid:
        reward = structure_format_score
    else:
        reward = 0 if answer is None else final_format_score
    outcome = _Outcome(reward, answer, max(tag_counts), comparison, correct, False)
    return outcome, valid, hit


def retrieval_hit(
    blocks: Iterable[str],
    golds: Golds,
    normalizer: str,
    word_boundary: bool,
    reject_empty_gold: bool,
) -> bool:
    """A normalized gold inside a normalized retrieved block (under the SubEM guards)."""
    normalize = get_normalizer(normalizer)
    index = gold_index(golds, normalizer, reject_empty_gold)
    return any(subem_match(normalize(block.strip()), index, word_boundary) for block in blocks)


@scorer(
    "compute_score_format",
    SEARCH_R1_DATA_SOURCES,
    validate=_check_normalizer,
    results=FORMAT_RESULTS,
)
@_with_options(base=_options_of(_format_outcome))
def score_format(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Search-R1's format-aware EM reward; dict with :data:`FORMAT_RESULT_KEYS`.

    ``acc`` is the paid EM; ``spam_penalized`` is always 0 (a repeated answer makes the format
    invalid instead).
    """
    outcome, valid, retrieval_hit = _format_outcome(solution_str, golds, **options)
    result = _qa_result(outcome, outcome.paid_match)
    result["format_valid"] = 1.0 if valid else 0.0
    result["retrieval_hit"] = 1.0 if retrieval_hit else 0.0
    return result


# ------------------------------------------------------------------ verl-compatible functions
# Same positional parameters as verl's functions. ``format_score`` and ``score`` pass through
# with any type verl accepts (a Fraction stays a Fraction); every other option is checked as
# the router scorer of the same name checks it.


def _checked(name: str, options: Mapping[str, Any]) -> None:
    if options:
        _registration(name).bind(options)


@cache
def _registration(name: str) -> Registration:
    return lookup(SEARCH_R1_DATA_SOURCES[0], name)


def compute_score(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    **options: Any,
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score``, configurable (``method`` unused, as in verl).

    Returns ``0`` without an answer, ``format_score`` on a wrong one, ``score`` on an exact match
    (``score * spam_factor`` when spammed). ``options``: those of the ``compute_score`` scorer.
    """
    _checked("compute_score", options)
    golds = coerce_golds(ground_truth)
    return _qa_outcome(
        "em", solution_str, golds, format_score=format_score, score=score, with_f1=False, **options
    ).reward


def compute_score_subem(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    *,
    penalize_subem: bool = False,
    **options: Any,
) -> Any:
    """verl's ``search_r1_like_qa_em.compute_score_subem``, configurable (``method`` unused).

    ``options``: those of the ``compute_score_subem`` scorer.
    """
    if options or penalize_subem is not False:
        _checked("compute_score_subem", {**options, "penalize_subem": penalize_subem})
    golds = coerce_golds(ground_truth)
    return _qa_outcome(
        "subem",
        solution_str,
        golds,
        format_score=format_score,
        score=score,
        penalize=penalize_subem,
        with_f1=False,
        **options,
    ).reward


def compute_score_f1(
    solution_str: str,
    ground_truth: Any,
    method: str = "strict",
    format_score: Any = 0.0,
    score: Any = 1.0,
    **options: Any,
) -> Any:
    """Token-F1 reward with the signature of the functions above (``method`` unused)."""
    _checked("compute_score_f1", options)
    golds = coerce_golds(ground_truth)
    return _qa_outcome(
        "f1", solution_str, golds, format_score=format_score, score=score, **options
    ).reward


def compute_score_format(
    solution_str: str, ground_truth: Any, method: str = "strict", **options: Any
) -> Any:
    """Search-R1's ``qa_em_format.compute_score_em`` (``method`` unused; upstream's unused
    ``format_score`` is not accepted). ``options``: those of the ``compute_score_format``
    scorer; ``prompt_included=True`` reproduces upstream on the decoded prompt plus response.
    """
    _checked("compute_score_format", options)
    return _format_outcome(solution_str, coerce_golds(ground_truth), **options)[0].reward
