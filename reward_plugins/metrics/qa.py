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
from typing import Annotated, Any, NamedTuple

from reward_plugins import cache
from reward_plugins.deprecation import forward_to
from reward_plugins.errors import InvalidGroundTruth
from reward_plugins.metrics.base import (
    DEFAULT_NORMALIZER,
    Metric,
    Targets,
    TokenPairMetric,
    f_measure,
    reject_with_compat,
    resolve_normalizer,
    takes_options_of,
)
from reward_plugins.options import Flag, OneOf
from reward_plugins.text import get_normalizer, normalize_squad

SQUAD = "squad"
SQUAD_V2 = "squad_v2"
SQUAD_PRESETS = (SQUAD, SQUAD_V2)
SquadPreset = Annotated[str | None, OneOf(SQUAD_PRESETS), "the official SQuAD script to follow"]


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

    def __init__(self, *, normalizer: str | None = None, compat: SquadPreset = None) -> None:
        if compat is not None:
            self.compat: str | None = compat
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

    def __init__(
        self, *, normalizer: str | None = None, word_boundary: Annotated[bool, Flag()] = False
    ) -> None:
        self.normalizer = normalizer if normalizer is not None else SQUAD
        self._normalize = resolve_normalizer(self.normalizer, self.name)
        self.word_boundary = word_boundary

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
        compat: SquadPreset = None,
    ) -> None:
        if compat is not None:
            self.compat: str | None = compat
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


__getattr__ = forward_to(
    "reward_plugins.metrics.qa", "reward_plugins.metrics.squad_v2", frozenset({"squad_v2_scores"})
)
"""``squad_v2_scores`` moved to :mod:`reward_plugins.metrics.squad_v2`; this name forwards to it,
with a warning, for one release."""
