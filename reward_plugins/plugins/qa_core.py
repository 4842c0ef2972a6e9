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
the QA scorers, and :class:`QAOptions` declares the QA options once (default, type, range and
doc of each; :mod:`reward_plugins.options`): a scorer written as ``(solution_str, golds,
**options)`` registers with ``options=QAOptions`` (or a subclass adding its own fields), which
is where :func:`reward_plugins.registry.scorer` reads its options from. ``plugins/search_r1.py``
and ``plugins/tool_agent.py`` are built on it; so can a third-party QA scorer.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple, TypeVar

from reward_plugins.cache import BUILT_METRICS, BoundedCache
from reward_plugins.errors import InvalidOption
from reward_plugins.extract import ExtractMode, TagScan, scan_tags
from reward_plugins.groundtruth import Golds
from reward_plugins.metrics import Metric, get_metric
from reward_plugins.metrics.qa import Comparison, compare, gold_index, subem_match
from reward_plugins.options import (
    Factor,
    NonNegativeInt,
    PositiveInt,
    Score,
    declared_options,
    freeze,
)
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


NormalizerName = Annotated[str, "the text normalizer (reward_plugins.text)"]
WordBoundary = Annotated[bool, "SubEM matches whole words only"]
MaxAnswerWords = Annotated[NonNegativeInt | None, "a longer answer never matches (None: no limit)"]
RejectEmptyGold = Annotated[bool, "a gold that normalizes to '' matches nothing"]
"""The options of how an answer is compared with the golds, declared once for every QA-style
scorer's options (:class:`QAOptions`, Search-R1's format scorer)."""


@dataclass(frozen=True, kw_only=True)
class QAOptions:
    """The QA options, shared by every QA-style scorer; their defaults are verl's."""

    format_score: Annotated[Score, "paid for an answer that does not match"] = 0.0
    score: Annotated[Score, "paid for a match"] = 1.0
    max_answer_tags: Annotated[
        PositiveInt, "more opening or closing answer tags than this is spam"
    ] = DEFAULT_MAX_ANSWER_TAGS
    spam_factor: Annotated[Factor, "multiplies a spammed match's reward"] = DEFAULT_SPAM_FACTOR
    extract: Annotated[ExtractMode, "which answer span is read"] = "last"
    normalizer: NormalizerName = "squad"
    subem_word_boundary: WordBoundary = False
    max_answer_words: MaxAnswerWords = None
    reject_empty_gold: RejectEmptyGold = False


_QA = QAOptions()


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
    format_score: Any = _QA.format_score,
    score: Any = _QA.score,
    max_answer_tags: int = _QA.max_answer_tags,
    spam_factor: float = _QA.spam_factor,
    extract: ExtractMode = _QA.extract,
    normalizer: str = _QA.normalizer,
    subem_word_boundary: bool = _QA.subem_word_boundary,
    max_answer_words: int | None = _QA.max_answer_words,
    reject_empty_gold: bool = _QA.reject_empty_gold,
    penalize: bool = True,
    with_f1: bool = True,
    metric: Metric | None = None,
    scan: TagScan | None = None,
) -> QAOutcome:
    """The outcome of one response under the QA options (:class:`QAOptions`, whose defaults
    these are, checked by the registry): verl's decision table, for any match rule.

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


ScorerT = TypeVar("ScorerT", bound=Callable[..., Any])


def _qa_parameters() -> list[inspect.Parameter]:
    return [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=s.default)
        for n, s in declared_options(QAOptions).items()
    ]


def with_options(*extra: inspect.Parameter, base: Any = None) -> Callable[[ScorerT], ScorerT]:
    """Deprecated: register with ``scorer(..., options=QAOptions)`` (or a subclass).

    Kept for one release: attaches a declaration of the QA options plus ``extra`` (keyword-only
    ``inspect.Parameter`` objects) that :func:`reward_plugins.registry.scorer` reads; put it
    under the ``scorer`` decorator as before.
    """
    warnings.warn(
        "qa_core.with_options is deprecated; pass options=QAOptions (or a dataclass subclass "
        "of it) to reward_plugins.scorer",
        DeprecationWarning,
        stacklevel=2,
    )
    fields = [
        (p.name, p.annotation, dataclasses.field(default=p.default))
        if p.default is not inspect.Parameter.empty
        else (p.name, p.annotation, dataclasses.field())
        for p in extra
    ]
    declaration = dataclasses.make_dataclass(
        "QAOptionsWith", fields, bases=(QAOptions,), frozen=True, kw_only=True
    )

    def decorate(function: ScorerT) -> ScorerT:
        function.__reward_plugins_options__ = declaration  # type: ignore[attr-defined]
        return function

    return decorate


def options_of(
    function: Callable[..., Any], *, drop: tuple[str, ...] = ()
) -> list[inspect.Parameter]:
    """Deprecated with :func:`with_options`: the keyword-only parameters of ``function``
    (annotations resolved), but those in ``drop``."""
    warnings.warn(
        "qa_core.options_of is deprecated; options are declared by a dataclass "
        "(reward_plugins.options.declared_options)",
        DeprecationWarning,
        stacklevel=2,
    )
    return [
        parameter
        for parameter in inspect.signature(function, eval_str=True).parameters.values()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.name not in drop
    ]


def keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    """Deprecated with :func:`with_options`: a keyword-only parameter for it."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def __getattr__(name: str) -> Any:
    """``QA_PARAMETERS``, deprecated: the QA options are :class:`QAOptions`'s fields."""
    if name == "QA_PARAMETERS":
        warnings.warn(
            "qa_core.QA_PARAMETERS is deprecated; read declared_options(QAOptions)",
            DeprecationWarning,
            stacklevel=2,
        )
        return _qa_parameters()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
