"""Answer metrics: exact match, substring match, token F1 and label accuracy.

Default contract (one tokenizer for every token metric, ``words``: ``re.findall(r"\\w+",
text.lower())``):

- ``exact_match``: 1.0 when ``prediction.strip() == target.strip()`` for some target (after the
  ``normalizer`` option, ``none`` by default).
- ``subem``: 1.0 when a SQuAD-normalized target is a substring of the SQuAD-normalized
  prediction, as Search-R1's ``subem_check`` (a target that normalizes to "" always matches).
- ``f1``: multiset token F1, best over targets; both token lists empty give 1.0, exactly one
  empty gives 0.0.
- ``accuracy``: label equality up to case (``str.casefold``) and surrounding whitespace.

``compat="squad"`` (``exact_match``, ``f1``) is the official SQuAD v1.1 evaluation: SQuAD
normalization, whitespace tokens, and F1 = 0 when no token is shared, even when both answers
are empty (EM is then 1).

``compat="squad_v2"`` (``exact_match``, ``f1``) is the official SQuAD 2.0 evaluation, which
scores unanswerable questions: the same normalization, but targets that normalize to ``""`` are
dropped, and when none is left the question is unanswerable and its only gold is ``""``. A
prediction that normalizes to ``""`` (``""``, ``"the"``, ``"?"``) then scores 1 (EM and F1) on
an unanswerable question and 0 on an answerable one. :func:`squad_v2_scores` gives the
official corpus report (``exact``, ``f1``, ``HasAns_*``, ``NoAns_*``, the no-answer threshold).

References:
    Rajpurkar et al. 2016, SQuAD, and its official ``evaluate-v1.1.py``; Rajpurkar, Jia and
    Liang 2018, "Know What You Don't Know: Unanswerable Questions for SQuAD", and its official
    ``evaluate-v2.0.py`` (github.com/rajpurkar/SQuAD-explorer; also
    github.com/huggingface/evaluate, ``metrics/squad_v2/compute_score.py``); Search-R1
    (github.com/PeterGriffinJin/Search-R1, ``verl/utils/reward_score/qa_em.py``) for SubEM.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from reward_plugins import cache
from reward_plugins.errors import InvalidGroundTruth, InvalidInput
from reward_plugins.metrics.base import (
    DEFAULT_NORMALIZER,
    Metric,
    Targets,
    TokenPairMetric,
    check_choice,
    check_flag,
    check_prediction,
    coerce_targets,
    f_measure,
    reject_with_compat,
    resolve_normalizer,
    takes_options_of,
)
from reward_plugins.options import describe_value, finite_number, is_finite_number
from reward_plugins.text import get_normalizer, normalize_squad

SQUAD = "squad"
SQUAD_V2 = "squad_v2"
SQUAD_PRESETS = (SQUAD, SQUAD_V2)


# ------------------------------------------------------------------- the QA comparison core
# EM, SubEM and token F1 against a set of golds, and the answer guards. Both the metrics below
# and the Search-R1 scorers compare through these functions.


class GoldIndex:
    """Golds under one normalizer; what whole-token SubEM and token F1 need is built on first use.

    Built once per ground truth and normalizer, and shared by the rows of a GRPO group.
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


_GOLD_CACHE_SIZE = cache.GOLD_INDEX_ENTRIES
GOLD_INDEX_BYTE_BUDGET = cache.GOLD_INDEX_BYTES
"""The gold indexes kept stay within an estimated 64 MiB (and 4096 per normalizer). Each counts
200 bytes, four times the size of its golds (the key, the normalized golds, the padded copies)
and 256 bytes a token (F1's token sets and counts); one estimated above a quarter of the budget
is not kept."""
_gold_caches: dict[tuple[str, bool], dict[tuple[str, ...], GoldIndex]] = {}
_gold_bytes = 0
_gold_lock = threading.Lock()
_last_index: tuple[Any, str, bool, GoldIndex] = ((), "", False, GoldIndex(()))
"""The last lookup, replaced whole (one reference: safe to read from any thread)."""


def gold_index(
    golds: tuple[str, ...], normalizer: str = SQUAD, reject_empty_gold: bool = False
) -> GoldIndex:
    """The golds, normalized once per ground truth (a GRPO group shares one).

    Plain dicts emptied when full: cheaper per call than ``functools.lru_cache``.

    Raises:
        InvalidGroundTruth: ``reject_empty_gold`` and every gold normalizes to ``""``.
        InvalidOption: unknown ``normalizer``.
    """
    global _last_index
    last = _last_index  # the rows of a GRPO group share one golds tuple: one read, no hashing
    if last[0] is golds and last[1] == normalizer and last[2] is reject_empty_gold:
        return last[3]
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
        index = GoldIndex(strings)
        _keep(cache, golds, index)
    _last_index = (golds, normalizer, reject_empty_gold, index)
    return index


def _keep(
    cache: dict[tuple[str, ...], GoldIndex], golds: tuple[str, ...], index: GoldIndex
) -> None:
    """Remember ``index`` within the entry and byte budgets (all caches are emptied when full)."""
    global _gold_bytes
    size = 200 + sum(4 * gold.__sizeof__() + 256 * (gold.count(" ") + 1) for gold in golds)
    if size > GOLD_INDEX_BYTE_BUDGET // 4:
        return
    with _gold_lock:
        if len(cache) >= _GOLD_CACHE_SIZE or _gold_bytes + size > GOLD_INDEX_BYTE_BUDGET:
            for each in _gold_caches.values():
                each.clear()
            _gold_bytes = 0
        cache[golds] = index
        _gold_bytes += size


def subem_match(normalized: str, golds: GoldIndex, word_boundary: bool = False) -> bool:
    """A normalized gold occurs in the normalized prediction (as whole tokens with
    ``word_boundary``: normalized text has single spaces between tokens)."""
    if word_boundary:
        normalized = f" {normalized} "
        candidates = golds.padded
    else:
        candidates = golds.strings
    for gold in candidates:  # noqa: SIM110 (a loop is cheaper than any() over a generator)
        if gold in normalized:
            return True
    return False


def best_token_f1(prediction: str, golds: GoldIndex) -> float:
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
            best = max(best, f_measure(1.0 * same / len(prediction_tokens), same / gold_length))
    return best


class Comparison(NamedTuple):
    """How one extracted answer compares with the golds (all False/0.0 without an answer)."""

    em: bool
    subem: bool
    f1: float
    too_long: bool
    """More words than ``max_answer_words``: no match may be paid."""


NO_ANSWER = Comparison(False, False, 0.0, False)

# NamedTuple(...) goes through a Python-level __new__; tuple.__new__ gives the same object at
# half the cost, on the hot path.
_build = tuple.__new__


def compare(
    answer: str | None,
    golds: tuple[str, ...],
    normalizer: str = SQUAD,
    subem_word_boundary: bool = False,
    max_answer_words: int | None = None,
    reject_empty_gold: bool = False,
    with_f1: bool = True,
) -> Comparison:
    """Compare an extracted answer with the golds under the four answer guards.

    The guards (each off by default): ``normalizer`` (``squad``, or ``unicode`` for non-ASCII
    punctuation and width variants), ``subem_word_boundary`` (SubEM on whole tokens),
    ``max_answer_words`` (a longer answer is ``too_long``: no match may be paid) and
    ``reject_empty_gold`` (golds that normalize to ``""`` are dropped; none left is an error).
    ``with_f1=False`` leaves ``f1`` at 0.0, for callers that need only EM or SubEM.

    Raises:
        InvalidGroundTruth: ``reject_empty_gold`` and no gold is left.
        InvalidOption: unknown ``normalizer``.
    """
    index = gold_index(golds, normalizer, reject_empty_gold)
    if answer is None:
        return NO_ANSWER
    normalized = (
        normalize_squad(answer) if normalizer == SQUAD else get_normalizer(normalizer)(answer)
    )
    em = normalized in index.strings
    return _build(
        Comparison,
        (
            em,
            em or subem_match(normalized, index, subem_word_boundary),
            (1.0 if em and normalized else best_token_f1(normalized, index)) if with_f1 else 0.0,
            max_answer_words is not None and len(answer.split()) > max_answer_words,
        ),
    )


# ------------------------------------------------------------------------------ SQuAD 2.0


def answerable_golds(golds: tuple[str, ...]) -> GoldIndex | None:
    """The golds of a SQuAD 2.0 question that normalize to a non-empty answer, or ``None`` when
    none does (the question is unanswerable: its only gold is ``""``).

    Example:
        >>> answerable_golds(("The", "Paris!")).strings
        ('paris',)
        >>> answerable_golds(("", "an")) is None
        True
    """
    index = gold_index(golds)
    if all(index.strings):
        return index
    if not any(index.strings):
        return None
    return gold_index(golds, SQUAD, reject_empty_gold=True)


def squad_v2_exact(normalized: str, golds: GoldIndex | None) -> float:
    """SQuAD 2.0 EM of a SQuAD-normalized prediction: equal to a gold, ``""`` for an
    unanswerable question (``golds`` is ``None``)."""
    if golds is None:
        return 0.0 if normalized else 1.0
    return 1.0 if normalized in golds.strings else 0.0


def squad_v2_f1(normalized: str, golds: GoldIndex | None) -> float:
    """SQuAD 2.0 F1 of a SQuAD-normalized prediction: when either side has no token, 1 if both
    have none, else 0; otherwise the best SQuAD token F1 over the answerable golds."""
    if golds is None:
        return 0.0 if normalized else 1.0
    if not normalized:
        return 0.0
    return best_token_f1(normalized, golds)


class ExactMatch(Metric):
    """Exact match with any target, after a named normalizer and ``str.strip``.

    Args:
        normalizer: normalizer name, ``none`` by default (see :mod:`reward_plugins.text`).
        compat: ``"squad"`` for the official SQuAD v1.1 EM, ``"squad_v2"`` for SQuAD 2.0 EM
            (targets that normalize to ``""`` are dropped; with none left the question is
            unanswerable and only an empty prediction matches); both fix the normalizer.

    Example:
        >>> ExactMatch()(" Paris ", ["paris", "Paris"])
        1.0
        >>> ExactMatch(compat="squad").signature
        'exact_match|compat:squad|norm:squad'
        >>> ExactMatch(compat="squad_v2")("the", ["An", "Paris"]), ExactMatch(compat="squad")(
        ...     "the", ["An", "Paris"])
        (0.0, 1.0)

    Raises:
        ValueError: unknown normalizer or compat, or a normalizer given with ``compat``.
    """

    name = "exact_match"

    def __init__(self, *, normalizer: str | None = None, compat: str | None = None) -> None:
        if compat is not None:
            self.compat: str | None = check_choice(compat, SQUAD_PRESETS, "compat", self.name)
            reject_with_compat(self.name, compat, normalizer=normalizer)
            normalizer = SQUAD
        else:
            self.compat = None
        self.normalizer = normalizer if normalizer is not None else DEFAULT_NORMALIZER
        self._normalize = resolve_normalizer(self.normalizer, self.name)

    @property
    def signature(self) -> str:
        compat = f"|compat:{self.compat}" if self.compat else ""
        return f"{self.name}{compat}|norm:{self.normalizer}"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        if self.compat == SQUAD_V2:
            return squad_v2_exact(normalize_squad(prediction), answerable_golds(targets))
        if self.normalizer == SQUAD:
            return 1.0 if normalize_squad(prediction) in gold_index(targets).strings else 0.0
        normalized = self._normalize(prediction).strip()
        return float(any(self._normalize(target).strip() == normalized for target in targets))


class SubEM(Metric):
    """Substring exact match: a normalized target occurs inside the normalized prediction.

    Args:
        normalizer: normalizer name, ``squad`` by default (Search-R1's ``subem_check``).
        word_boundary: match whole tokens only ("Paris" does not match "parisian").

    Example:
        >>> SubEM()("It is Paris, France.", ["paris"])
        1.0

    Raises:
        ValueError: unknown normalizer.
    """

    name = "subem"

    def __init__(self, *, normalizer: str | None = None, word_boundary: bool = False) -> None:
        self.normalizer = normalizer if normalizer is not None else SQUAD
        self._normalize = resolve_normalizer(self.normalizer, self.name)
        self.word_boundary = check_flag(word_boundary, "word_boundary", self.name)

    @property
    def signature(self) -> str:
        boundary = "|words:whole" if self.word_boundary else ""
        return f"{self.name}|norm:{self.normalizer}{boundary}"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        index = gold_index(targets, self.normalizer)
        return float(subem_match(self._normalize(prediction), index, self.word_boundary))


def token_f1(prediction_tokens: list[str], target_tokens: list[str]) -> float:
    """Multiset token F1 of two non-empty token lists; 0.0 when they share no token.

    Example:
        >>> token_f1(["the", "the", "cat"], ["cat", "cat"])
        0.4
    """
    shared = sum((Counter(prediction_tokens) & Counter(target_tokens)).values())
    if shared == 0:
        return 0.0
    return f_measure(shared / len(prediction_tokens), shared / len(target_tokens))


class TokenF1(TokenPairMetric):
    """Token F1 (bag of tokens), the best over targets.

    Args:
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default.
        compat: ``"squad"`` for the official SQuAD v1.1 F1, ``"squad_v2"`` for SQuAD 2.0 F1
            (targets that normalize to ``""`` are dropped; with none left the question is
            unanswerable, and a prediction without tokens scores 1, any other 0); both fix the
            normalizer and the tokenizer.

    Example:
        >>> TokenF1()("the cat sat", "a cat sat down")
        0.5714285714285715
        >>> TokenF1(compat="squad")("", "")
        0.0
        >>> TokenF1(compat="squad_v2")("", "")
        1.0
        >>> TokenF1()("", "")
        1.0

    Raises:
        ValueError: unknown normalizer, tokenizer or compat, or one of them given with ``compat``.
    """

    name = "f1"

    def __init__(
        self,
        *,
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: str | None = None,
    ) -> None:
        if compat is not None:
            self.compat: str | None = check_choice(compat, SQUAD_PRESETS, "compat", self.name)
            reject_with_compat(self.name, compat, normalizer=normalizer, tokenizer=tokenizer)
            normalizer, tokenizer = SQUAD, "split"
        else:
            self.compat = None
        self._set_tokenization(normalizer, tokenizer)

    pair_score = staticmethod(token_f1)

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        if self.compat == SQUAD:
            return best_token_f1(normalize_squad(prediction), gold_index(targets))
        if self.compat == SQUAD_V2:
            return squad_v2_f1(normalize_squad(prediction), answerable_golds(targets))
        return super()._score(prediction, targets)


class Accuracy(Metric):
    """Label accuracy: equality with any target up to case folding and surrounding whitespace.

    Example:
        >>> Accuracy()(" Positive", ["negative", "POSITIVE"])
        1.0
    """

    name = "accuracy"

    @property
    def signature(self) -> str:
        return f"{self.name}|norm:strip+casefold"

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        label = prediction.strip().casefold()
        return float(any(target.strip().casefold() == label for target in targets))


@takes_options_of(ExactMatch)
def exact_match(prediction: str, targets: Targets, **options: Any) -> float:
    """1.0 when the normalized, stripped prediction equals a normalized, stripped target.

    See :class:`ExactMatch` for the options.

    Example:
        >>> exact_match("The Cat!", "cat", compat="squad")
        1.0
    """
    return ExactMatch(**options)(prediction, targets)


@takes_options_of(SubEM)
def subem(prediction: str, targets: Targets, **options: Any) -> float:
    """1.0 when a normalized target is a substring of the normalized prediction.

    See :class:`SubEM` for the options.

    Example:
        >>> subem("the capital is Paris", ["Paris", "Lyon"])
        1.0
    """
    return SubEM(**options)(prediction, targets)


@takes_options_of(TokenF1)
def f1(prediction: str, targets: Targets, **options: Any) -> float:
    """Token F1, the best over targets. See :class:`TokenF1` for the options.

    Example:
        >>> f1("the the cat", "cat cat", compat="squad")
        0.6666666666666666
    """
    return TokenF1(**options)(prediction, targets)


def accuracy(prediction: str, targets: Targets) -> float:
    """Label accuracy up to case and surrounding whitespace. See :class:`Accuracy`.

    Example:
        >>> accuracy("yes", "Yes ")
        1.0
    """
    return Accuracy()(prediction, targets)


def squad_v2_scores(
    predictions: Sequence[str],
    targets: Sequence[Targets],
    *,
    na_probabilities: Sequence[float] | None = None,
    na_threshold: float = 1.0,
) -> dict[str, float]:
    """The official SQuAD 2.0 report of a corpus, on the 0-1 scale (the official script's 0-100
    divided by 100 at the end; ``*_total`` and ``best_*_thresh`` are not rescaled).

    Row ``i`` is scored as ``exact_match``/``f1`` with ``compat="squad_v2"``. A question is
    answerable (``HasAns``) when ``targets[i]`` holds at least one target, as the official
    script's ``bool(qa["answers"])``; give ``[]`` for an unanswerable question. With
    ``na_probabilities`` (the model's probability that each question has no answer), a row
    whose probability exceeds ``na_threshold`` is taken as answered "no answer": it scores
    ``float(not answerable)`` for both EM and F1.

    Returns the official keys, in the official order: ``exact``, ``f1``, ``total``, then
    ``HasAns_exact``, ``HasAns_f1``, ``HasAns_total`` when some question is answerable and
    ``NoAns_*`` when some is not; with ``na_probabilities`` also ``best_exact``,
    ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh`` (the best scores over thresholds,
    from the scores before the threshold, as the script does when given an ``--na-prob-file``).

    Example:
        >>> report = squad_v2_scores(["Paris", "the", "Rome"], [["Paris"], [], "Lyon"])
        >>> report["exact"], report["HasAns_exact"], report["NoAns_f1"], report["NoAns_total"]
        (0.6666666666666667, 0.5, 1.0, 1)

    Raises:
        InvalidInput: the lengths of ``predictions``, ``targets`` and ``na_probabilities``
            differ (the message names them), no prediction, a prediction or target that is not
            a string, a probability that is not a finite number (NaN, an infinity).
        InvalidOption: ``na_threshold`` is not a finite number.

    References:
        github.com/rajpurkar/SQuAD-explorer, ``evaluate-v2.0.py`` (``get_raw_scores``,
        ``apply_no_ans_threshold``, ``make_eval_dict``, ``find_all_best_thresh``).
    """
    name = "squad_v2_scores"
    rows = _sequence(predictions, "predictions", name)
    golds = _sequence(targets, "targets", name)
    if len(rows) != len(golds):
        raise InvalidInput(f"{name}: {len(rows)} predictions but {len(golds)} targets")
    if not rows:
        raise InvalidInput(f"{name}: no predictions to score")
    finite_number(na_threshold, f"{name}: na_threshold")
    probabilities = _probabilities(na_probabilities, len(rows), name)
    exact: list[float] = []
    f1_scores: list[float] = []
    has_answer: list[bool] = []
    for row, (prediction, answers) in enumerate(zip(rows, golds, strict=True)):
        check_prediction(prediction, f"{name}: predictions[{row}]")
        answer_tuple = _answers(answers, f"{name}: targets[{row}]")
        index = answerable_golds(answer_tuple) if answer_tuple else None
        normalized = normalize_squad(prediction)
        exact.append(squad_v2_exact(normalized, index))
        f1_scores.append(squad_v2_f1(normalized, index))
        has_answer.append(bool(answer_tuple))
    threshold = float(na_threshold)
    exact_kept = _apply_threshold(exact, probabilities, has_answer, threshold)
    f1_kept = _apply_threshold(f1_scores, probabilities, has_answer, threshold)
    report = _report(exact_kept, f1_kept, range(len(rows)))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        group = [row for row, answerable in enumerate(has_answer) if answerable is wanted]
        if group:
            for key, value in _report(exact_kept, f1_kept, group).items():
                report[f"{prefix}_{key}"] = value
    if na_probabilities is not None:
        for key, scores in (("exact", exact), ("f1", f1_scores)):
            best, best_threshold = _best_threshold(rows, scores, probabilities, has_answer)
            report[f"best_{key}"] = best
            report[f"best_{key}_thresh"] = best_threshold
    return report


def _sequence(values: object, field: str, name: str) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInput(f"{name}: {field} must be a list, got {type(values).__name__}")
    return list(values)


def _answers(value: object, where: str) -> tuple[str, ...]:
    """A row's targets as a tuple; an empty list is an unanswerable question."""
    if not isinstance(value, str) and isinstance(value, (list, tuple)) and not value:
        return ()
    return coerce_targets(value, where)  # type: ignore[arg-type]


def _probabilities(values: Sequence[float] | None, count: int, name: str) -> list[float]:
    if values is None:
        return [0.0] * count
    probabilities = _sequence(values, "na_probabilities", name)
    if len(probabilities) != count:
        raise InvalidInput(f"{name}: {count} predictions but {len(probabilities)} na_probabilities")
    for row, value in enumerate(probabilities):
        if not is_finite_number(value):
            raise InvalidInput(
                f"{name}: na_probabilities[{row}] must be a finite number, got "
                f"{describe_value(value)}"
            )
    return [float(value) for value in probabilities]


def _apply_threshold(
    scores: list[float], probabilities: list[float], has_answer: list[bool], threshold: float
) -> list[float]:
    """A row predicted to have no answer scores ``float(not answerable)``."""
    return [
        float(not answerable) if probability > threshold else score
        for score, probability, answerable in zip(scores, probabilities, has_answer, strict=True)
    ]


def _report(exact: list[float], f1_scores: list[float], rows: Iterable[int]) -> dict[str, float]:
    selected = list(rows)
    total = len(selected)
    # The official script's percentages, in its operation order, then on the 0-1 scale.
    return {
        "exact": 100.0 * sum(exact[row] for row in selected) / total / 100,
        "f1": 100.0 * sum(f1_scores[row] for row in selected) / total / 100,
        "total": total,
    }


def _best_threshold(
    predictions: list[str],
    scores: list[float],
    probabilities: list[float],
    has_answer: list[bool],
) -> tuple[float, float]:
    """The best corpus score over no-answer thresholds, and the threshold giving it.

    Questions are taken by increasing probability; moving the threshold past one gains its
    score if it is answerable, and loses 1 if it is not and the prediction is non-empty.
    """
    current: float = sum(1 for answerable in has_answer if not answerable)
    best, best_threshold = current, 0.0
    for row in sorted(range(len(scores)), key=probabilities.__getitem__):
        if has_answer[row]:
            current += scores[row]
        elif predictions[row]:
            current -= 1
        if current > best:
            best, best_threshold = current, probabilities[row]
    return 100.0 * best / len(scores) / 100, best_threshold
