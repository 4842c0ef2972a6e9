"""BLEU at sentence and corpus level, any n-gram order 1..6, with sacrebleu's smoothing methods.

Two metrics share one implementation: ``bleu`` (:class:`Bleu`, option ``max_ngram_order``, 4 by
default, and under ``compat="sacrebleu"`` option ``tokenize``) and ``bleu_4`` (:class:`Bleu4`,
the order-4 case, without those two options).

Default contract: ``words`` tokens; against each target separately, the best over targets;
clipped n-gram precisions for n = 1..N (N = 4 for ``bleu_4``) with add-one on matches and
totals for n >= 2 only (Lin and Och's BLEU+1, sacrebleu's ``add-k`` with k = 1); brevity penalty
exp(1 - r/c) when c < r; 0.0 for an empty prediction or when no unigram matches. Scale 0-1.

``compat="sacrebleu"`` reproduces sacrebleu 2.6.0: ``sentence_bleu(prediction, targets).score /
100`` with its defaults (``13a`` tokens of the right-stripped text, ``exp`` smoothing, effective
order, all targets together: n-gram counts merged by maximum, closest reference length with
ties to the shorter), and :func:`corpus_bleu` equal to ``corpus_bleu(...).score / 100``; with
``max_ngram_order`` and ``tokenize`` (``13a``, ``none``, ``intl``, ``char``, ``zh``), the score of
``BLEU(max_ngram_order=..., tokenize=..., effective_order=True).sentence_score``. Every
float operation follows sacrebleu's order (``100 * c / t``, ``math.log``, builtin ``sum``,
``/ order``, ``exp``, ``* bp``), so the values agree to the last bit before the final division
by 100, on any interpreter (both sides call the same builtin ``sum``).

Smoothing methods (Chen and Cherry 2014), named as in sacrebleu: ``none``; ``floor`` (a zero
match count becomes ``smooth_value``, default 0.1); ``add-k`` (``smooth_value``, default 1,
added to matches and totals for n >= 2); ``exp`` (the k-th order without a match gets
precision 1 / (2^k * total), NIST's mteval-v13a rule).

Speed: 13a tokenization is cached per word. Short predictions count n-grams with ``Counter``
over tuples that ``zip`` builds from shifted token lists, counting only the prediction's n-grams
that a reference has (no Python loop per n-gram); from 200 prediction tokens on, n-grams are
coded as int64 (token ids in base V) and counted with ``numpy.unique``, whose fixed cost per call
then pays off. Both give the same counts.

References:
    Papineni et al. 2002, "BLEU"; Lin and Och 2004, "ORANGE" (BLEU+1); Chen and Cherry 2014, "A
    Systematic Comparison of Smoothing Techniques for Sentence-Level BLEU"; Post 2018,
    "A Call for Clarity in Reporting BLEU Scores" (sacrebleu 2.6.0, github.com/mjpost/sacrebleu,
    ``sacrebleu/metrics/bleu.py`` and ``sacrebleu/tokenizers/``).

Corpus statistics: :meth:`Bleu.sentence_statistics` gives sacrebleu's per-sentence vector
``[prediction length, reference length, matches(1..N), totals(1..N)]`` (int64) and
:meth:`Bleu.score_from_statistics` the score of a summed vector, so that
``score_from_statistics(sum of sentence_statistics)`` equals :meth:`Bleu.corpus_score`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, NamedTuple

import numpy as np

from reward_plugins.errors import InvalidOption
from reward_plugins.metrics.base import (
    Metric,
    Targets,
    check_prediction,
    coerce_targets,
    corpus_from_statistics,
    reject_with_compat,
    reject_without_compat,
    statistics_vector,
    takes_options_of,
)
from reward_plugins.metrics.ngrams import clipped_overlap, ngram_counts, ngrams
from reward_plugins.options import Flag, IntIn, OneOf, Range, finite_number

MAX_ORDER = 4
"""The order of ``bleu_4`` and the default ``max_ngram_order`` of ``bleu``."""
MAX_NGRAM_ORDERS = range(1, 7)
"""The valid values of ``max_ngram_order``."""
SACREBLEU_TOKENIZERS: dict[str, str] = {
    "13a": "13a",
    "char": "each_char",
    "intl": "intl",
    "none": "split",
    "zh": "zh",
}
"""sacrebleu's ``tokenize`` names -> the tokenizer of :mod:`reward_plugins.text.tokenize`."""
SMOOTHING_METHODS = ("none", "floor", "add-k", "exp")
Smoothing = Annotated[str | None, OneOf(SMOOTHING_METHODS), "the smoothing method"]
SmoothValue = Annotated[Any, "a finite number >= 0 (or None); checked with smooth, by __init__"]
Lowercase = Annotated[bool | None, Flag(), "lowercase both sides (compat='sacrebleu' only)"]
SMOOTHING_DEFAULT_VALUES: dict[str, float | None] = {
    "none": None,
    "floor": 0.1,
    "add-k": 1,
    "exp": None,
}
_SMOOTH_VALUES = Range(0.0, None)
DEFAULT_SMOOTHING = "add-k"
SACREBLEU = "sacrebleu"
SacrebleuPreset = Annotated[str | None, OneOf((SACREBLEU,)), "reproduce sacrebleu"]
SACREBLEU_SMOOTHING = "exp"
_NUMPY_FROM = 200  # prediction tokens from which numpy counts n-grams faster than Counter
_LOG_OF_ZERO = -9999999999  # sacrebleu's floor for log(0): one empty order zeroes the score


class BleuStats(NamedTuple):
    """Sufficient statistics of BLEU: lengths and per-order match and n-gram counts."""

    prediction_length: int
    reference_length: int
    correct: tuple[int, ...]
    total: tuple[int, ...]


def _max_counts_hashed(references: list[list[str]], order: int) -> Counter[Any]:
    """Counts of the n-grams of one order, the maximum over the references."""
    merged = ngram_counts(references[0], order)
    for reference in references[1:]:
        for key, count in ngram_counts(reference, order).items():
            if count > merged[key]:
                merged[key] = count
    return merged


def _clipped_matches_hashed(
    prediction: list[str], references: list[list[str]], max_order: int = MAX_ORDER
) -> list[int]:
    """Per order 1..``max_order``, prediction n-gram matches clipped by the references' maxima.

    Only the prediction's n-grams that a reference has are counted (``filter`` and ``Counter``
    run in C, no Python loop per n-gram).
    """
    correct = []
    for order in range(1, max_order + 1):
        reference = _max_counts_hashed(references, order)
        matched = Counter(filter(reference.__contains__, ngrams(prediction, order)))
        correct.append(clipped_overlap(matched, reference))
    return correct


def _max_counts_coded(references: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct n-gram codes of the references and their maximum counts."""
    if len(references) == 1:
        return np.unique(references[0], return_counts=True)
    distinct = [np.unique(codes, return_counts=True) for codes in references]
    keys, where = np.unique(np.concatenate([k for k, _ in distinct]), return_inverse=True)
    counts = np.zeros(len(keys), dtype=np.int64)
    np.maximum.at(counts, where, np.concatenate([c for _, c in distinct]))
    return keys, counts


def _clipped_matches_coded(
    prediction: list[str], references: list[list[str]], max_order: int = MAX_ORDER
) -> list[int] | None:
    """:func:`_clipped_matches_hashed` with n-grams coded as int64 and counted by numpy.

    Tokens get ids 0..V-1 for this call and the n-gram (a, b, c) the code ``(a * V + b) * V +
    c``, so codes of one order are distinct. Returns ``None`` when V**max_order would overflow
    int64.
    """
    ids: dict[str, int] = {}
    intern = ids.setdefault
    predicted = np.array([intern(token, len(ids)) for token in prediction], dtype=np.int64)
    targets = [np.array([intern(t, len(ids)) for t in gold], dtype=np.int64) for gold in references]
    base = max(1, len(ids))
    if base**max_order >= 2**63:
        return None
    correct = []
    predicted_codes, target_codes = predicted, targets
    for order in range(1, max_order + 1):
        if order > 1:
            predicted_codes = predicted_codes[:-1] * base + predicted[order - 1 :]
            target_codes = [
                codes[:-1] * base + gold[order - 1 :]
                for codes, gold in zip(target_codes, targets, strict=True)
            ]
        keys, counts = np.unique(predicted_codes, return_counts=True)
        reference_keys, reference_counts = _max_counts_coded(target_codes)
        _, at_prediction, at_reference = np.intersect1d(
            keys, reference_keys, assume_unique=True, return_indices=True
        )
        correct.append(int(np.minimum(counts[at_prediction], reference_counts[at_reference]).sum()))
    return correct


def _closest_length(prediction_length: int, reference_lengths: Iterable[int]) -> int:
    """The reference length closest to the prediction's; a tie goes to the shorter one."""
    return min(reference_lengths, key=lambda length: (abs(length - prediction_length), length))


def _statistics(
    prediction: list[str], references: list[list[str]], reference_length: int, max_order: int
) -> BleuStats:
    """BLEU statistics of a prediction against references merged by maximum count per n-gram.

    Long predictions use numpy (its fixed cost per call pays off above ``_NUMPY_FROM``
    tokens), short ones ``Counter``; both give the same counts.
    """
    correct = None
    if len(prediction) >= _NUMPY_FROM:
        correct = _clipped_matches_coded(prediction, references, max_order)
    if correct is None:
        correct = _clipped_matches_hashed(prediction, references, max_order)
    length = len(prediction)
    total = tuple(max(0, length - order + 1) for order in range(1, max_order + 1))
    return BleuStats(length, reference_length, tuple(correct), total)


def smoothed_precisions(
    correct: Sequence[int],
    total: Sequence[int],
    smooth: str,
    smooth_value: float | None,
    effective_order: bool,
    scale: float,
) -> list[float]:
    """The n-gram precisions (times ``scale``) that enter the geometric mean, after smoothing.

    ``correct`` and ``total`` hold one count per order, 1..N. Orders stop at the first one with
    no n-gram at all; with ``effective_order`` only the orders before it count, otherwise they
    count as precision 0.

    Example:
        >>> smoothed_precisions([2, 0, 0, 0], [2, 1, 0, 0], "exp", None, True, 1.0)
        [1.0, 0.5]
    """
    max_order = len(correct)
    precisions = [0.0] * max_order
    orders = max_order
    halvings = 1.0
    for index in range(max_order):
        matches: float = correct[index]
        count: float = total[index]
        if smooth == "add-k" and index > 0:
            matches += smooth_value  # type: ignore[operator]
            count += smooth_value  # type: ignore[operator]
        if count == 0:
            break
        if effective_order:
            orders = index + 1
        if matches == 0:
            if smooth == "exp":
                halvings *= 2
                precisions[index] = scale / (halvings * count)
            elif smooth == "floor":
                precisions[index] = scale * smooth_value / count  # type: ignore[operator]
        else:
            precisions[index] = scale * matches / count
    return precisions[:orders]


def bleu_from_statistics(
    stats: BleuStats,
    *,
    smooth: str,
    smooth_value: float | None,
    effective_order: bool,
    scale: float = 1.0,
) -> float:
    """BLEU from its sufficient statistics, on a 0-``scale`` scale (sacrebleu's formula).

    Example:
        >>> stats = BleuStats(6, 6, (5, 3, 2, 1), (6, 5, 4, 3))  # "the cat sat on a mat"
        >>> bleu_from_statistics(stats, smooth="exp", smooth_value=None, effective_order=True)
        0.537284965911771
    """
    brevity_penalty = 1.0
    if stats.prediction_length < stats.reference_length:
        brevity_penalty = (
            math.exp(1 - stats.reference_length / stats.prediction_length)
            if stats.prediction_length > 0
            else 0.0
        )
    if not any(stats.correct):
        return 0.0
    precisions = smoothed_precisions(
        stats.correct, stats.total, smooth, smooth_value, effective_order, scale
    )
    logs = [math.log(precision) if precision != 0.0 else _LOG_OF_ZERO for precision in precisions]
    return brevity_penalty * math.exp(sum(logs) / len(precisions))


class Bleu(Metric):
    """Sentence BLEU of any n-gram order 1..6 (and corpus BLEU through :meth:`corpus_score`).

    Args:
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default (not with ``compat``).
        smooth: ``none``, ``floor``, ``add-k`` or ``exp``; ``add-k`` by default, ``exp`` under
            ``compat="sacrebleu"``.
        smooth_value: the floor value (default 0.1) or k (default 1); only for those two methods.
        effective_order: drop the orders above the longest n-gram of the prediction instead of
            scoring them 0 (default ``True``; sacrebleu's corpus BLEU uses ``False``).
        lowercase: with ``compat="sacrebleu"`` only: sacrebleu's ``lowercase`` (default ``False``).
        max_ngram_order: the highest n-gram order N, an int in 1..6 (default 4); sacrebleu's
            ``BLEU(max_ngram_order=N)``.
        tokenize: with ``compat="sacrebleu"`` only: sacrebleu's tokenizer name, ``13a``
            (default), ``none`` (whitespace split), ``intl``, ``char`` or ``zh``.
        compat: ``"sacrebleu"`` to reproduce sacrebleu (fixes normalizer and tokenizer).

    Example:
        >>> Bleu(max_ngram_order=2)("the cat sat on a mat", "the cat sat on the mat")
        0.7453559924999299
        >>> Bleu(compat="sacrebleu", tokenize="char", max_ngram_order=6).signature
        'bleu|compat:sacrebleu|case:mixed|norm:none|tok:char|smooth:exp|eff:yes|order:6'

    Raises:
        InvalidOption: an unknown name, a ``smooth_value`` given for ``none`` or ``exp``, a
            normalizer or tokenizer given with ``compat``, ``lowercase`` or ``tokenize`` without
            it, ``effective_order`` or ``lowercase`` not a bool, ``smooth_value`` not a finite
            number >= 0 (NaN and infinities too), ``max_ngram_order`` not an int in 1..6.
        ImportError: ``tokenize="intl"`` and the ``regex`` package is not installed.
    """

    name = "bleu"
    _order_in_signature = True

    def __init__(
        self,
        *,
        normalizer: str | None = None,
        tokenizer: str | None = None,
        smooth: Smoothing = None,
        smooth_value: SmoothValue = None,
        effective_order: Annotated[bool, Flag()] = True,
        lowercase: Lowercase = None,
        max_ngram_order: Annotated[
            int, IntIn(MAX_NGRAM_ORDERS.start, MAX_NGRAM_ORDERS.stop - 1)
        ] = MAX_ORDER,
        tokenize: Annotated[str | None, OneOf(tuple(SACREBLEU_TOKENIZERS))] = None,
        compat: SacrebleuPreset = None,
    ) -> None:
        self.max_ngram_order = max_ngram_order
        if compat is not None:
            self.compat: str | None = compat
            reject_with_compat(self.name, compat, normalizer=normalizer, tokenizer=tokenizer)
            tokenize = tokenize if tokenize is not None else "13a"
            self._set_tokenization(normalizer, SACREBLEU_TOKENIZERS[tokenize])
            self.tokenizer = tokenize  # the signature names sacrebleu's tokenizer
            self._tokenize("")  # load what the tokenizer imports now (intl: regex)
        else:
            reject_without_compat(self.name, lowercase=lowercase, tokenize=tokenize)
            self.compat = None
            self._set_tokenization(normalizer, tokenizer)
        default_smoothing = SACREBLEU_SMOOTHING if self.compat else DEFAULT_SMOOTHING
        self.smooth = smooth if smooth is not None else default_smoothing
        self.smooth_value = self._check_smooth_value(smooth_value)
        self.effective_order = effective_order
        self.lowercase = lowercase is not None and lowercase
        # sacrebleu scores on 0-100 and the last bits of its result depend on that scale.
        self._scale = 100.0 if self.compat else 1.0

    def _check_smooth_value(self, value: float | None) -> float | None:
        if value is None:
            return SMOOTHING_DEFAULT_VALUES[self.smooth]
        if SMOOTHING_DEFAULT_VALUES[self.smooth] is None:
            raise InvalidOption(f"{self.name}: smooth={self.smooth!r} takes no smooth_value")
        # sacrebleu takes NaN or an infinity and scores NaN or inf; a huge int overflows there.
        return finite_number(value, f"{self.name}: smooth_value", _SMOOTH_VALUES)

    @property
    def signature(self) -> str:
        smoothing = (
            self.smooth if self.smooth_value is None else f"{self.smooth}:{self.smooth_value}"
        )
        parts = [self.name]
        if self.compat:
            parts += [f"compat:{self.compat}", f"case:{'lc' if self.lowercase else 'mixed'}"]
        parts += [
            f"norm:{self.normalizer}",
            f"tok:{self.tokenizer}",
            f"smooth:{smoothing}",
            f"eff:{'yes' if self.effective_order else 'no'}",
        ]
        if self._order_in_signature:
            parts.append(f"order:{self.max_ngram_order}")
        return "|".join(parts)

    def _tokens(self, text: str) -> list[str]:
        if self.compat:
            return self._tokenize((text.lower() if self.lowercase else text).rstrip())
        return self._tokenize(self._normalize(text))

    def _finish(self, stats: BleuStats) -> float:
        value = bleu_from_statistics(
            stats,
            smooth=self.smooth,
            smooth_value=self.smooth_value,
            effective_order=self.effective_order,
            scale=self._scale,
        )
        # sacrebleu reaches 100.00000000000004 for a perfect match; keep the result in [0, 1].
        return min(1.0, value / self._scale)

    def statistics(
        self, prediction: str, targets: Targets, *, merge: bool | None = None
    ) -> list[BleuStats]:
        """Sufficient statistics of ``prediction``: one entry per target, or one merged entry.

        Args:
            prediction: the text scored.
            targets: one target or a non-empty list of them.
            merge: merge the targets as sacrebleu does (maximum count per n-gram, closest
                length) instead of one entry per target; by default, only under ``compat``.

        Raises:
            TypeError, ValueError: as for calling the metric.
        """
        check_prediction(prediction, self.name)
        golds = coerce_targets(targets, self.name)
        return self._statistics(
            prediction, golds, self.compat is not None if merge is None else merge
        )

    def _statistics(self, prediction: str, golds: tuple[str, ...], merge: bool) -> list[BleuStats]:
        predicted = self._tokens(prediction)
        references = [self._tokens(gold) for gold in golds]
        order = self.max_ngram_order
        if merge:
            reference_length = _closest_length(len(predicted), map(len, references))
            return [_statistics(predicted, references, reference_length, order)]
        return [_statistics(predicted, [gold], len(gold), order) for gold in references]

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        statistics = self._statistics(prediction, targets, merge=self.compat is not None)
        return max(self._finish(stats) for stats in statistics)

    def sentence_statistics(self, prediction: str, targets: Targets) -> np.ndarray:
        """The corpus statistics of one sentence, the targets merged (as in a corpus score).

        sacrebleu's layout: ``[prediction length, reference length, matches of order 1..N,
        n-grams of order 1..N]``, int64. Summed over sentences, :meth:`score_from_statistics`
        turns it into :meth:`corpus_score`. Under ``compat`` the score of one sentence's vector
        is the sentence score; under the default contract it is the score against all targets
        merged, which is the sentence score only for one target (that score is the best target).

        Example:
            >>> Bleu(compat="sacrebleu", max_ngram_order=2).sentence_statistics("a b", ["a c"])
            array([2, 2, 1, 0, 2, 1])

        Raises:
            InvalidInput: as for calling the metric.
        """
        (stats,) = self.statistics(prediction, targets, merge=True)
        return np.array(
            [stats.prediction_length, stats.reference_length, *stats.correct, *stats.total],
            dtype=np.int64,
        )

    def score_from_statistics(self, statistics: np.ndarray) -> float:
        """The score of a (summed) statistics vector of :meth:`sentence_statistics`; in [0, 1].

        Example:
            >>> metric = Bleu(compat="sacrebleu", max_ngram_order=2)
            >>> metric.score_from_statistics(metric.sentence_statistics("a b", ["a c"]))
            0.49999999999999994

        Raises:
            InvalidInput: not a 1-D vector of 2 + 2 * ``max_ngram_order`` whole counts.
        """
        order = self.max_ngram_order
        counts = statistics_vector(statistics, 2 + 2 * order, self.name)
        stats = BleuStats(
            counts[0], counts[1], tuple(counts[2 : 2 + order]), tuple(counts[2 + order :])
        )
        return self._finish(stats)

    def corpus_score(self, predictions: Sequence[str], references: Sequence[Targets]) -> float:
        """Corpus BLEU: statistics summed over sentences, the references of a sentence merged.

        ``references[i]`` is the target or list of targets of ``predictions[i]``. Under the
        default contract too the targets of a sentence are merged as sacrebleu does (maximum
        count per n-gram, closest length): a corpus score has no "best target".

        Raises:
            ValueError: ``predictions`` and ``references`` differ in length, or a row has no
                reference; TypeError: a row is not a string (the message names the row).
        """
        width = 2 + 2 * self.max_ngram_order
        return corpus_from_statistics(self, predictions, references, width)


class Bleu4(Bleu):
    """Sentence BLEU-4 (and corpus BLEU through :meth:`corpus_score`): :class:`Bleu` of order 4.

    Args:
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default.
        smooth: ``none``, ``floor``, ``add-k`` or ``exp``; ``add-k`` by default, ``exp`` under
            ``compat="sacrebleu"``.
        smooth_value: the floor value (default 0.1) or k (default 1); only for those two methods.
        effective_order: drop the orders above the longest n-gram of the prediction instead of
            scoring them 0 (default ``True``; sacrebleu's corpus BLEU uses ``False``).
        lowercase: with ``compat="sacrebleu"`` only: sacrebleu's ``lowercase`` (default ``False``).
        compat: ``"sacrebleu"`` to reproduce sacrebleu (fixes normalizer and tokenizer to 13a).

    Example:
        >>> Bleu4()("the cat sat on a mat", "the cat sat on the mat")
        0.6389431042462724
        >>> Bleu4(compat="sacrebleu").signature
        'bleu_4|compat:sacrebleu|case:mixed|norm:none|tok:13a|smooth:exp|eff:yes'

    Raises:
        ValueError: an unknown name, a ``smooth_value`` that is negative, NaN or infinite or
            given for ``none`` or ``exp``, a normalizer or tokenizer given with ``compat``,
            ``lowercase`` without it.
        TypeError: ``effective_order`` or ``lowercase`` is not a bool, or ``smooth_value`` is
            not a number.
    """

    name = "bleu_4"
    _order_in_signature = False

    def __init__(
        self,
        *,
        normalizer: str | None = None,
        tokenizer: str | None = None,
        smooth: Smoothing = None,
        smooth_value: SmoothValue = None,
        effective_order: Annotated[bool, Flag()] = True,
        lowercase: Lowercase = None,
        compat: SacrebleuPreset = None,
    ) -> None:
        super().__init__(
            normalizer=normalizer,
            tokenizer=tokenizer,
            smooth=smooth,
            smooth_value=smooth_value,
            effective_order=effective_order,
            lowercase=lowercase,
            compat=compat,
        )


@takes_options_of(Bleu)
def bleu(prediction: str, targets: Targets, **options: Any) -> float:
    """Sentence BLEU of order ``max_ngram_order`` on a 0-1 scale. See :class:`Bleu`.

    Example:
        >>> bleu("北京大学在北京", ["北京的大学"], compat="sacrebleu", tokenize="zh")
        0.185750579991336
    """
    return Bleu(**options)(prediction, targets)


@takes_options_of(Bleu4)
def bleu_4(prediction: str, targets: Targets, **options: Any) -> float:
    """Sentence BLEU-4 on a 0-1 scale. See :class:`Bleu4` for the options.

    Example:
        >>> bleu_4("a b", ["a c"], compat="sacrebleu")
        0.49999999999999994
    """
    return Bleu4(**options)(prediction, targets)


@takes_options_of(Bleu)
def corpus_bleu(
    predictions: Sequence[str],
    references: Sequence[Targets],
    *,
    effective_order: bool = False,
    **options: Any,
) -> float:
    """Corpus BLEU on a 0-1 scale; ``references[i]`` holds the reference(s) of prediction i.

    With ``compat="sacrebleu"`` it equals ``sacrebleu.corpus_bleu(predictions, streams).score /
    100`` (``BLEU(max_ngram_order=..., tokenize=...).corpus_score`` for the other orders and
    tokenizers), where ``streams[k][i]`` is the k-th reference of prediction i (``None`` where a
    prediction has fewer). See :class:`Bleu` for the options; with the defaults of
    ``max_ngram_order`` and ``tokenize`` the metric is ``bleu_4`` (errors name it).

    Example:
        >>> corpus_bleu(["the cat sat on the mat", "hello"],
        ...             [["the cat sat on the mat"], ["hello there"]], compat="sacrebleu")
        0.866877899750182
    """
    options["effective_order"] = effective_order
    order, tokenize = options.get("max_ngram_order", MAX_ORDER), options.get("tokenize")
    if type(order) is int and order == MAX_ORDER and tokenize is None:  # bleu_4's options
        options.pop("max_ngram_order", None)
        options.pop("tokenize", None)
        return Bleu4(**options).corpus_score(predictions, references)
    return Bleu(**options).corpus_score(predictions, references)
