"""The QA core that every QA-style scorer shares: verl's decision table, the QA options, the
fixed-key result, and the tools that give a scorer the options the registry reads.

A QA-style scorer finds an answer span, compares it with the golds under the QA options and pays
by verl's ``search_r1_like_qa_em`` decision table (verl 0.9.1,
``verl/utils/reward_score/search_r1_like_qa_em.py``):

- no answer: ``0`` (an int);
- an answer that matches (and is not ``too_long``): ``score``, times ``spam_factor`` when the
  response holds more than ``max_answer_tags`` opening or closing answer tags;
- otherwise ``format_score``.

:func:`qa_outcome` applies that table under any match rule (EM, SubEM, token F1, a metric of
:mod:`reward_plugins.metrics`), :func:`qa_result` shapes the outcome as the fixed-key dict of
the QA scorers, and :data:`QA_PARAMETERS` with :func:`with_options` declare the options once:
a scorer written as ``(solution_str, golds, **options)`` gets exactly those keyword-only
parameters, which is where :func:`reward_plugins.registry.scorer` reads options from.
``plugins/search_r1.py`` and ``plugins/tool_agent.py`` are built on it; so can a third-party
QA scorer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from reward_plugins.cache import BUILT_METRICS, BoundedCache
from reward_plugins.errors import InvalidOption
from reward_plugins.extract import ExtractMode, TagScan, scan_tags
from reward_plugins.groundtruth import Golds
from reward_plugins.metrics import Metric, get_metric
from reward_plugins.metrics.qa import Comparison, compare, gold_index, subem_match
from reward_plugins.options import Factor, NonNegativeInt, PositiveInt, Score, freeze
from reward_plugins.text import NORMALIZERS, get_normalizer

SEARCH_R1_DATA_SOURCES: tuple[str, ...] = tuple(
    f"searchR1_{name}"
    for name in ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
)
"""The data sources of Search-R1's seven QA sets, served by the QA scorers."""

DEFAULT_MAX_ANSWER_TAGS = 10
"""verl's ``max_answer_tags``: more opening or closing answer tags than this is spam."""
DEFAULT_SPAM_FACTOR = 0.25
"""verl's penalty factor on a spammed match (it divides by 4)."""


class QAOutcome(NamedTuple):
    """What :func:`qa_outcome` decided for one response."""

    reward: Any
    """The reward, of the type of ``score``/``format_score`` (an int ``0`` without answer)."""
    answer: str | None
    """The answer span (stripped), or ``None``."""
    answer_tags: int
    """The larger of the opening and closing answer tag counts."""
    comparison: Comparison
    """The answer against the golds under the QA options."""
    paid_match: bool
    """A match was paid (not too long)."""
    penalized: bool
    """The spam penalty was applied."""


_build = tuple.__new__  # NamedTuple(...) without its Python-level __new__, on the hot path


def penalized_score(score: Any, spam_factor: float) -> Any:
    """``score * spam_factor``; at the default factor ``score / 4`` exactly as verl computes it,
    which keeps the type of a ``Fraction`` or ``Decimal`` score.

    Example:
        >>> penalized_score(1.0, DEFAULT_SPAM_FACTOR), penalized_score(1.0, 0.5)
        (0.25, 0.5)
    """
    return score / 4 if spam_factor == DEFAULT_SPAM_FACTOR else score * spam_factor


def qa_outcome(
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
) -> QAOutcome:
    """The outcome of one response under the QA options (their defaults are verl's): verl's
    decision table, for any match rule.

    No answer: ``0``. A match that is not ``too_long``: ``score`` (times F1 for ``"f1"``, times
    ``metric(answer, golds)`` for ``"metric"``), times ``spam_factor`` when ``penalize`` and the
    response has more than ``max_answer_tags`` opening or closing answer tags. Otherwise
    ``format_score``. ``rule`` is ``"em"``, ``"subem"``, ``"f1"`` or ``"metric"``; the options
    after ``reject_empty_gold`` are set by the scorers, not by users: ``scan`` is the answer and
    the tag counts when the scorer found them itself (else :func:`scan_tags` reads them).

    Example:
        >>> qa_outcome("em", "<answer> Paris </answer>", ("paris",)).reward
        1.0
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
        return _build(QAOutcome, (0, None, answer_tags, comparison, False, False))
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
        return _build(QAOutcome, (format_score, answer, answer_tags, comparison, False, False))
    if penalize and answer_tags > max_answer_tags:
        penalized = penalized_score(paid, spam_factor)
        return _build(QAOutcome, (penalized, answer, answer_tags, comparison, True, True))
    return _build(QAOutcome, (paid, answer, answer_tags, comparison, True, False))


def qa_result(outcome: QAOutcome, acc: bool) -> dict[str, Any]:
    """The QA scorers' dict result, with ``acc`` as given: the keys ``score``, ``acc``, ``em``,
    ``subem``, ``f1``, ``answer_found``, ``answer_tags`` and ``spam_penalized``, in this order
    (Search-R1's ``QA_RESULT_KEYS``), every value a float but the tag count."""
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


def retrieval_hit(
    blocks: Iterable[str],
    golds: Golds,
    normalizer: str,
    word_boundary: bool,
    reject_empty_gold: bool,
) -> bool:
    """A normalized gold inside a normalized retrieved block (under the SubEM guards).

    Example:
        >>> retrieval_hit(["Doc 1: Paris is the capital."], ("paris",), "squad", False, False)
        True
    """
    normalize = get_normalizer(normalizer)
    index = gold_index(golds, normalizer, reject_empty_gold)
    return any(subem_match(normalize(block.strip()), index, word_boundary) for block in blocks)


def check_normalizer(options: Mapping[str, Any]) -> None:
    """A registry validator: ``options["normalizer"]`` names a normalizer of
    :mod:`reward_plugins.text`.

    Raises:
        InvalidOption: it does not (the message lists the valid names).
    """
    if options["normalizer"] not in NORMALIZERS:
        raise InvalidOption(
            f"option 'normalizer' must be one of {', '.join(map(repr, sorted(NORMALIZERS)))}, "
            f"got {options['normalizer']!r}"
        )


_metrics: BoundedCache[Any, Metric] = BoundedCache(BUILT_METRICS)


def cached_metric(name: str, options: Mapping[str, Any] | None) -> Metric:
    """The metric ``name`` of :mod:`reward_plugins.metrics` built with ``options``: built (and
    checked) once per option set, as the registry binds, then reused (at most
    :data:`reward_plugins.cache.BUILT_METRICS` are kept).

    Raises:
        InvalidOption: an unknown metric, or an option it refuses.
    """
    key = (name, freeze(options or {}))
    metric = _metrics.get(key)
    if metric is None:
        metric = _metrics[key] = get_metric(name, **(options or {}))
    return metric


def options_of(
    function: Callable[..., Any], *, drop: tuple[str, ...] = ()
) -> list[inspect.Parameter]:
    """The keyword-only parameters of ``function`` (annotations resolved), but those in ``drop``.

    Example:
        >>> [p.name for p in options_of(penalized_score)], [p.name for p in QA_PARAMETERS][:2]
        ([], ['format_score', 'score'])
    """
    return [
        parameter
        for parameter in inspect.signature(function, eval_str=True).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name not in drop
    ]


QA_PARAMETERS: list[inspect.Parameter] = options_of(
    qa_outcome, drop=("penalize", "with_f1", "metric", "scan")
)
"""The QA options, declared once on :func:`qa_outcome`; the QA scorers take exactly these."""


def keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    """A keyword-only parameter, for :func:`with_options` (``inspect.Parameter.empty`` as
    ``default`` makes the option required)."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


ScorerT = TypeVar("ScorerT", bound=Callable[..., Any])


def with_options(
    *extra: inspect.Parameter, base: list[inspect.Parameter] = QA_PARAMETERS
) -> Callable[[ScorerT], ScorerT]:
    """Give a ``(solution_str, golds, **options)`` scorer the signature the registry reads its
    options from: ``base`` parameters (by default :data:`QA_PARAMETERS`) then ``extra``.

    The function is returned itself, with ``__signature__`` set; put this decorator under
    :func:`reward_plugins.registry.scorer`.
    """
    positional = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for n in ("solution_str", "golds")
    ]

    def decorate(function: ScorerT) -> ScorerT:
        function.__signature__ = inspect.Signature([*positional, *base, *extra])  # type: ignore[attr-defined]
        return function

    return decorate
