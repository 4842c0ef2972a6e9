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

import numbers
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from reward_plugins.errors import InvalidGroundTruth
from reward_plugins.extract import (
    EXTRACT_MODES,
    ExtractMode,
    extract_tag,
    find_tag_spans,
    scan_tags,
)
from reward_plugins.groundtruth import Golds, coerce_golds
from reward_plugins.plugins.trajectory import DEFAULT_END_MARKERS, TrajectoryTags, format_error
from reward_plugins.registry import register
from reward_plugins.text import get_normalizer, normalize_squad

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

FORMAT_RESULT_KEYS: tuple[str, ...] = (*QA_RESULT_KEYS, "format_valid", "retrieval_hit")
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


# ------------------------------------------------------------------------------ comparison


class _GoldIndex:
    """Golds under one normalizer; what whole-token SubEM and token F1 need is built on first use.

    Built once per ground truth and shared by the rows of a GRPO group.
    """

    __slots__ = ("_padded", "_token_counts", "_vocabulary", "strings")

    def __init__(self, strings: tuple[str, ...]) -> None:
        self.strings = strings
        self._padded: tuple[str, ...] | None = None
        self._vocabulary: frozenset[str] | None = None
        self._token_counts: tuple[tuple[dict[str, int], int], ...] | None = None

    @property
    def padded(self) -> tuple[str, ...]:
        """Each gold between spaces, for whole-token SubEM."""
        if self._padded is None:
            self._padded = tuple(f" {gold} " for gold in self.strings)
        return self._padded

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every token of every gold."""
        if self._vocabulary is None:
            self._vocabulary = frozenset(" ".join(self.strings).split())
        return self._vocabulary

    @property
    def token_counts(self) -> tuple[tuple[dict[str, int], int], ...]:
        """Each gold's token multiset and its number of tokens."""
        if self._token_counts is None:
            self._token_counts = tuple(
                (_count_tokens(tokens), len(tokens))
                for tokens in (gold.split() for gold in self.strings)
            )
        return self._token_counts


def _count_tokens(tokens: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for token in tokens:  # cheaper than Counter for a few tokens
        counts[token] = counts.get(token, 0) + 1
    return counts


_GOLD_CACHE_SIZE = 4096
_gold_caches: dict[tuple[str, bool], dict[Golds, _GoldIndex]] = {}


def _gold_index(golds: Golds, normalizer: str, reject_empty_gold: bool) -> _GoldIndex:
    """The golds, normalized once per ground truth (a GRPO group shares one).

    Plain dicts emptied when full: cheaper per call than ``functools.lru_cache``.

    Raises:
        InvalidGroundTruth: ``reject_empty_gold`` and every gold normalizes to ``""``.
        ValueError: unknown ``normalizer``.
    """
    cache = _gold_caches.get((normalizer, reject_empty_gold))
    if cache is None:
        get_normalizer(normalizer)  # validate the name before creating a cache for it
        cache = _gold_caches[(normalizer, reject_empty_gold)] = {}
    index = cache.get(golds)
    if index is None:
        normalize = get_normalizer(normalizer)
        strings = tuple(normalize(gold) for gold in golds)
        if reject_empty_gold:
            strings = tuple(gold for gold in strings if gold)
            if not strings:
                raise InvalidGroundTruth(
                    f"every gold answer normalizes to the empty string under normalizer "
                    f"{normalizer!r} (reject_empty_gold=True), golds: {golds!r:.200}"
                )
        index = _GoldIndex(strings)
        if len(cache) >= _GOLD_CACHE_SIZE:
            cache.clear()
        cache[golds] = index
    return index


def _subem(normalized: str, golds: _GoldIndex, word_boundary: bool) -> bool:
    if word_boundary:  # whole tokens: normalized text has single spaces between tokens
        normalized = f" {normalized} "
        candidates = golds.padded
    else:
        candidates = golds.strings
    for gold in candidates:  # noqa: SIM110 (a loop is cheaper than any() over a generator)
        if gold in normalized:
            return True
    return False


def _token_f1(prediction: str, golds: _GoldIndex) -> float:
    """Best SQuAD v1.1 token F1 of a normalized prediction over the normalized golds.

    0.0 when no gold shares a token with it (so an empty prediction scores 0.0, as in SQuAD v1.1).
    """
    prediction_tokens = prediction.split()
    if golds.vocabulary.isdisjoint(prediction_tokens):
        return 0.0
    if prediction in golds.strings:
        return 1.0
    prediction_counts = _count_tokens(prediction_tokens)
    best = 0.0
    for gold_counts, gold_length in golds.token_counts:
        same = 0
        for token, count in prediction_counts.items():
            gold_count = gold_counts.get(token)
            if gold_count:
                same += count if count < gold_count else gold_count
        if same:
            precision = 1.0 * same / len(prediction_tokens)
            recall = 1.0 * same / gold_length
            best = max(best, (2 * precision * recall) / (precision + recall))
    return best


class Comparison(NamedTuple):
    """How one extracted answer compares with the golds (all False/0.0 without an answer)."""

    em: bool
    subem: bool
    f1: float
    too_long: bool
    """More words than ``max_answer_words``: no match may be paid."""


_NO_ANSWER = Comparison(False, False, 0.0, False)

# NamedTuple(...) goes through a Python-level __new__; the hot paths build their results with
# tuple.__new__ directly, which is twice as fast and gives the same object.
_build = tuple.__new__


def compare(
    answer: str | None,
    golds: Golds,
    normalizer: str = "squad",
    subem_word_boundary: bool = False,
    max_answer_words: int | None = None,
    reject_empty_gold: bool = False,
    with_f1: bool = True,
) -> Comparison:
    """Compare an extracted answer with the golds under the answer guards.

    ``with_f1=False`` leaves ``f1`` at 0.0, for callers that need only EM or SubEM.

    Raises:
        InvalidGroundTruth: ``reject_empty_gold`` and no gold is left.
        ValueError: unknown ``normalizer``.
    """
    index = _gold_index(golds, normalizer, reject_empty_gold)
    if answer is None:
        return _NO_ANSWER
    normalized = (
        normalize_answer(answer) if normalizer == "squad" else get_normalizer(normalizer)(answer)
    )
    return _build(
        Comparison,
        (
            normalized in index.strings,
            _subem(normalized, index, subem_word_boundary),
            _token_f1(normalized, index) if with_f1 else 0.0,
            max_answer_words is not None and len(answer.split()) > max_answer_words,
        ),
    )


# ------------------------------------------------------------------------------ the reward


def _check_options(
    max_answer_tags: int, spam_factor: float, extract: str, max_answer_words: Any
) -> None:
    if extract not in EXTRACT_MODES:
        raise ValueError(f"extract must be one of {EXTRACT_MODES}, got {extract!r}")
    if type(max_answer_tags) is not int:
        raise TypeError(f"max_answer_tags must be an int, got {type(max_answer_tags).__name__}")
    if isinstance(spam_factor, bool) or not isinstance(spam_factor, (int, float)):
        raise TypeError(f"spam_factor must be a number, got {type(spam_factor).__name__}")
    if max_answer_words is not None and type(max_answer_words) is not int:
        raise TypeError(
            f"max_answer_words must be an int or None, got {type(max_answer_words).__name__}"
        )
    if max_answer_words is not None and max_answer_words < 0:
        raise ValueError(f"max_answer_words must be >= 0, got {max_answer_words}")


def _reject_unknown(function: str, options: dict[str, Any], valid: frozenset[str]) -> None:
    unknown = options and options.keys() - valid
    if unknown:
        raise TypeError(
            f"{function}() got unknown option(s) {', '.join(map(repr, sorted(unknown)))}; "
            f"valid options: {', '.join(sorted(valid))}"
        )


def _penalize(score: Any, spam_factor: float) -> Any:
    """``score * spam_factor``; at the default factor ``score / 4`` exactly as verl computes it,
    which keeps the type of a ``Fraction`` or ``Decimal`` score."""
    return score / 4 if spam_factor == DEFAULT_SPAM_FACTOR else score * spam_factor


def _check_flags(**flags: Any) -> None:
    for name, value in flags.items():
        if type(value) is not bool:
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}: {value!r}")


_REWARD_OPTIONS = frozenset(
    {"format_score", "score", "structure_format_score", "final_format_score", "retrieval_score"}
)


def _check_reward_values(options: dict[str, Any]) -> None:
    """Router scorers return floats, so their reward options must be real numbers (the
    verl-compatible functions pass any value through, as verl does)."""
    for name, value in options.items():
        if name in _REWARD_OPTIONS and (
            isinstance(value, bool) or not isinstance(value, numbers.Real)
        ):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}: {value!r}")


MatchRule = Literal["em", "subem", "f1"]


class _Outcome(NamedTuple):
    reward: Any
    answer: str | None
    answer_tags: int
    comparison: Comparison
    paid_match: bool
    """A match was paid (not too long)."""
    penalized: bool


def _qa_outcome(
    rule: MatchRule,
    solution_str: str,
    golds: Golds,
    *,
    format_score: Any = 0.0,
    score: Any = 1.0,
    max_answer_tags: int = DEFAULT_MAX_ANSWER_TAGS,
    spam_factor: float = DEFAULT_SPAM_FACTOR,
    penalize: bool = True,
    extract: ExtractMode = "last",
    normalizer: str = "squad",
    subem_word_boundary: bool = False,
    max_answer_words: int | None = None,
    reject_empty_gold: bool = False,
    with_f1: bool = True,
) -> _Outcome:
    """The outcome of one response under the QA options (their defaults are verl's)."""
    _check_options(max_answer_tags, spam_factor, extract, max_answer_words)
    _check_flags(
        penalize_subem=penalize,
        subem_word_boundary=subem_word_boundary,
        reject_empty_gold=reject_empty_gold,
    )
    answer, opening, closing = scan_tags(solution_str, "answer", extract)
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
    return _decide(
        rule,
        answer,
        answer_tags,
        comparison,
        format_score,
        score,
        penalize,
        max_answer_tags,
        spam_factor,
    )


def _default_outcome(
    rule: MatchRule,
    solution_str: str,
    golds: Golds,
    format_score: Any = 0.0,
    score: Any = 1.0,
    with_f1: bool = True,
) -> _Outcome:
    """:func:`_qa_outcome` with every option but ``format_score`` and ``score`` at its default.

    The hot path of the verl-compatible functions and the router scorers, without the general
    one's checks and branches; a test pins the two together on generated rollouts.
    """
    answer, opening, closing = scan_tags(solution_str, "answer", "last")
    index = _gold_index(golds, "squad", False)
    answer_tags = opening if opening > closing else closing
    if answer is None:
        return _build(_Outcome, (0, None, answer_tags, _NO_ANSWER, False, False))
    normalized = normalize_answer(answer)
    em = normalized in index.strings
    subem = em or _subem(normalized, index, False)
    f1 = _token_f1(normalized, index) if with_f1 or rule == "f1" else 0.0
    comparison = _build(Comparison, (em, subem, f1, False))
    return _decide(
        rule,
        answer,
        answer_tags,
        comparison,
        format_score,
        score,
        rule != "subem",
        DEFAULT_MAX_ANSWER_TAGS,
        DEFAULT_SPAM_FACTOR,
    )


def _decide(
    rule: MatchRule,
    answer: str | None,
    answer_tags: int,
    comparison: Comparison,
    format_score: Any,
    score: Any,
    penalize: bool,
    max_answer_tags: int,
    spam_factor: float,
) -> _Outcome:
    """verl's decision table, generalized over the match rule.

    No answer: ``0``. A match (EM, SubEM, or a positive token F1) that is not ``too_long``:
    ``score`` (times F1 for ``"f1"``), times ``spam_factor`` when ``penalize`` and the response
    has more than ``max_answer_tags`` opening or closing answer tags. Otherwise ``format_score``.
    """
    if answer is None:
        return _build(_Outcome, (0, None, answer_tags, comparison, False, False))
    if rule == "em":
        matched = comparison.em
    elif rule == "subem":
        matched = comparison.subem
    else:
        matched = comparison.f1 > 0
        score = score * comparison.f1
    if not matched or comparison.too_long:
        return _build(_Outcome, (format_score, answer, answer_tags, comparison, False, False))
    if penalize and answer_tags > max_answer_tags:
        penalized = _penalize(score, spam_factor)
        return _build(_Outcome, (penalized, answer, answer_tags, comparison, True, True))
    return _build(_Outcome, (score, answer, answer_tags, comparison, True, False))


QA_OPTIONS: frozenset[str] = frozenset(
    {
        "format_score",
        "score",
        "max_answer_tags",
        "spam_factor",
        "extract",
        "normalizer",
        "subem_word_boundary",
        "max_answer_words",
        "reject_empty_gold",
    }
)
"""Options of ``compute_score`` and ``compute_score_f1`` (``compute_score_subem`` adds
``penalize_subem``); defaults in :func:`_qa_outcome`, the rewards in :func:`_decide`."""

SUBEM_OPTIONS: frozenset[str] = QA_OPTIONS | {"penalize_subem"}


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


def _format_outcome(
    solution_str: str,
    golds: Golds,
    *,
    structure_format_score: Any = 0,
    final_format_score: Any = 0,
    retrieval_score: Any = 0,
    score: Any = 1.0,
    prompt_included: bool = False,
    end_markers: tuple[str, ...] | list[str] = DEFAULT_END_MARKERS,
    think_tag: str = "think",
    search_tag: str = "search",
    information_tag: str = "information",
    answer_tag: str = "answer",
    normalizer: str = "squad",
    subem_word_boundary: bool = False,
    max_answer_words: int | None = None,
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
    _check_options(DEFAULT_MAX_ANSWER_TAGS, DEFAULT_SPAM_FACTOR, "last", max_answer_words)
    _check_flags(
        prompt_included=prompt_included,
        subem_word_boundary=subem_word_boundary,
        reject_empty_gold=reject_empty_gold,
    )
    if isinstance(end_markers, str) or not all(isinstance(m, str) for m in end_markers):
        raise TypeError(f"end_markers must be a list of strings, got {end_markers!r}")
    tags = TrajectoryTags(think_tag, search_tag, information_tag, answer_tag)
    valid = (
        format_error(solution_str, tags, prompt_included=prompt_included, end_markers=end_markers)
        is None
    )
    if prompt_included:  # upstream: the prompt's example answer is the first match
        spans = find_tag_spans(solution_str, answer_tag)
        answer = spans[-1].strip() if len(spans) >= 2 else None
        tag_counts = (solution_str.count(f"<{answer_tag}>"), solution_str.count(f"</{answer_tag}>"))
    else:
        answer, *tag_counts = scan_tags(solution_str, answer_tag, "last")
    comparison = compare(
        answer,
        golds,
        normalizer=normalizer,
        subem_word_boundary=subem_word_boundary,
        max_answer_words=max_answer_words,
        reject_empty_gold=reject_empty_gold,
    )
    retrieval_hit = valid and _retrieval_hit(
        solution_str, golds, information_tag, normalizer, subem_word_boundary, reject_empty_gold
    )
    correct = answer is not None and comparison.em and not comparison.too_long
    if correct:
        reward = score if valid else score - structure_format_score
    elif valid and retrieval_hit:
        reward = structure_format_score + retrieval_score
    elif valid:
        reward = structure_format_score
    else:
        reward = 0 if answer is None else final_format_score
    outcome = _Outcome(reward, answer, max(tag_counts), comparison, correct, False)
    return outcome, valid, retrieval_hit


def _retrieval_hit(
    text: str,
    golds: Golds,
    information_tag: str,
    normalizer: str,
    word_boundary: bool,
    reject_empty_gold: bool,
) -> bool:
    """A normalized gold inside a normalized information block (under the SubEM guards)."""
    normalize = get_normalizer(normalizer)
    index = _gold_index(golds, normalizer, reject_empty_gold)
    return any(
        _subem(normalize(block.strip()), index, word_boundary)
        for block in find_tag_spans(text, information_tag)
    )


FORMAT_OPTIONS: frozenset[str] = frozenset(
    {
        "structure_format_score",
        "final_format_score",
        "retrieval_score",
        "score",
        "prompt_included",
        "end_markers",
        "think_tag",
        "search_tag",
        "information_tag",
        "answer_tag",
        "normalizer",
        "subem_word_boundary",
        "max_answer_words",
        "reject_empty_gold",
    }
)
"""Options of ``compute_score_format``; defaults in :func:`_format_outcome`."""


# ---------------------------------------------------------------------------- router scorers


@register("compute_score", SEARCH_R1_DATA_SOURCES, options=QA_OPTIONS)
def score_em(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Exact-match reward with the anti-spam penalty; dict with :data:`QA_RESULT_KEYS`.

    ``acc`` is the paid match: EM, within ``max_answer_words``.
    """
    if options:
        _check_reward_values(options)
        outcome = _qa_outcome("em", solution_str, golds, **options)
    else:
        outcome = _default_outcome("em", solution_str, golds)
    return _qa_result(outcome, outcome.paid_match)


@register("compute_score_subem", SEARCH_R1_DATA_SOURCES, options=SUBEM_OPTIONS)
def score_subem(
    solution_str: str, golds: Golds, *, penalize_subem: bool = False, **options: Any
) -> dict[str, Any]:
    """Substring-match reward (spam penalty only with ``penalize_subem``); dict result.

    ``acc`` is the paid match: SubEM, within ``max_answer_words``.
    """
    if options or penalize_subem is not False:
        _check_reward_values(options)
        outcome = _qa_outcome("subem", solution_str, golds, penalize=penalize_subem, **options)
    else:
        outcome = _default_outcome("subem", solution_str, golds)
    return _qa_result(outcome, outcome.paid_match)


@register("compute_score_f1", SEARCH_R1_DATA_SOURCES, options=QA_OPTIONS)
def score_f1(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Token-F1 reward (R1-Searcher, ReSearch): ``score * F1``, ``format_score`` when F1 is 0.

    No answer gives 0; the spam penalty multiplies a positive F1 reward. ``acc`` is EM
    (within ``max_answer_words``).
    """
    if options:
        _check_reward_values(options)
        outcome = _qa_outcome("f1", solution_str, golds, **options)
    else:
        outcome = _default_outcome("f1", solution_str, golds)
    comparison = outcome.comparison
    return _qa_result(outcome, comparison.em and not comparison.too_long)


@register("compute_score_format", SEARCH_R1_DATA_SOURCES, options=FORMAT_OPTIONS)
def score_format(solution_str: str, golds: Golds, **options: Any) -> dict[str, Any]:
    """Search-R1's format-aware EM reward; dict with :data:`FORMAT_RESULT_KEYS`.

    ``acc`` is the paid EM; ``spam_penalized`` is always 0 (a repeated answer makes the format
    invalid instead).
    """
    _check_reward_values(options)
    outcome, valid, retrieval_hit = _format_outcome(solution_str, golds, **options)
    result = _qa_result(outcome, outcome.paid_match)
    result["format_valid"] = 1.0 if valid else 0.0
    result["retrieval_hit"] = 1.0 if retrieval_hit else 0.0
    return result


# ------------------------------------------------------------------ verl-compatible functions
# Same positional parameters as verl's functions; every other option is a keyword (QA_OPTIONS).


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
    (``score * spam_factor`` when spammed). ``options``: any of :data:`QA_OPTIONS`.
    """
    if not options:
        golds = coerce_golds(ground_truth)
        return _default_outcome("em", solution_str, golds, format_score, score, False).reward
    _reject_unknown("compute_score", options, QA_OPTIONS)
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

    ``options``: any of :data:`QA_OPTIONS`.
    """
    if not options and penalize_subem is False:
        golds = coerce_golds(ground_truth)
        return _default_outcome("subem", solution_str, golds, format_score, score, False).reward
    _reject_unknown("compute_score_subem", options, QA_OPTIONS)
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
    if not options:
        golds = coerce_golds(ground_truth)
        return _default_outcome("f1", solution_str, golds, format_score, score).reward
    _reject_unknown("compute_score_f1", options, QA_OPTIONS)
    golds = coerce_golds(ground_truth)
    return _qa_outcome(
        "f1", solution_str, golds, format_score=format_score, score=score, **options
    ).reward


def compute_score_format(
    solution_str: str, ground_truth: Any, method: str = "strict", **options: Any
) -> Any:
    """Search-R1's ``qa_em_format.compute_score_em`` (``method`` unused; upstream's unused
    ``format_score`` is not accepted). ``options``: any of :data:`FORMAT_OPTIONS`;
    ``prompt_included=True`` reproduces upstream on the decoded prompt plus response.
    """
    _reject_unknown("compute_score_format", options, FORMAT_OPTIONS)
    return _format_outcome(solution_str, coerce_golds(ground_truth), **options)[0].reward
