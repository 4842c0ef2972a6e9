"""ROUGE-N, ROUGE-L and ROUGE-Lsum: precision, recall or F-measure (beta = 1) of token overlap.

Metrics: ``rouge_1``, ``rouge_2``, ``rouge_n`` (option ``n``), ``rouge_l`` and ``rouge_lsum``;
each takes ``measure="f" | "p" | "r"`` (default ``"f"``).

- ROUGE-N: clipped n-gram overlap; precision = overlap / prediction n-grams, recall = overlap /
  target n-grams (0 when that count is 0).
- ROUGE-L: the longest common subsequence (LCS) of the two token lists over their lengths.
- ROUGE-Lsum: summary-level LCS (Lin 2004, section 3.2). Texts are split into sentences at
  ``"\\n"`` (empty lines dropped) and tokenized sentence by sentence; every target sentence
  takes the union of its LCS index sets against all prediction sentences, and a union token is
  a hit only while neither summary has used up its occurrences of that token.

Default contract: ``words`` tokens; both token lists empty give 1.0 and exactly one empty gives
0.0, for every measure (texts with tokens but fewer than n have no n-gram: ROUGE-N 0.0). With
several targets the target with the highest F-measure is chosen (the first one on ties), and
the requested measure is that target's, as rouge-score's ``score_multi`` does.

``compat="rouge_score"`` reproduces Google rouge-score 0.1.2 bit for bit:
``RougeScorer([type], use_stemmer=...).score_multi(targets, prediction)[type].<measure>`` with
type ``rouge1`` ... ``rouge9``, ``rougeL`` or ``rougeLsum``: its tokenizer (optionally with
nltk's Porter stemmer) and 0 when either side has no token. rouge-score's
``split_summaries=True`` splits sentences with nltk's punkt model, which is data that nltk does
not ship; it is refused here (put one sentence per line instead).

Speed: every text is tokenized once per call (the prediction is not re-tokenized per target, as
rouge-score does). ROUGE-N counts with ``reward_plugins._speedups.ngram_matches`` where the package
was built with a C compiler (one hash-table pass per order, no Python object per n-gram), and
without the extension with :func:`reward_plugins.metrics.ngrams.ngram_overlap` (n-grams are tuples
that ``zip`` builds from shifted token lists, their overlap counted with ``Counter``, ``filter``,
``map`` and set intersections: C loops, no Python loop per n-gram); the shared n-gram helpers are
those of :mod:`reward_plugins.metrics.ngrams`. LCS lengths come from rapidfuzz's
bit-parallel ``LCSseq`` (Hyyro's algorithm); the LCS index sets of ROUGE-Lsum come from the same
bit-parallel recurrence run on Python integers (one row per target-sentence token, kept for the
traceback), read back along the path that rouge-score's table traceback takes, so the union (and so
the score) is the same. ``benchmarks/bench_rouge.py`` times them against rouge-score.

References:
    Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries"; rouge-score 0.1.2
    (github.com/google-research/google-research) ``rouge/rouge_scorer.py``,
    ``rouge/scoring.py`` and ``rouge/tokenize.py``; Hyyro 2004, "Bit-parallel LCS-length
    computation revisited"; Crochemore et al. 2001, "A fast and practical bit-vector algorithm
    for the longest common subsequence problem".
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from typing import Annotated, Any, ClassVar, Generic, NamedTuple, TypeVar

from reward_plugins.errors import InvalidOption
from reward_plugins.metrics.base import (
    Metric,
    Targets,
    check_prediction,
    coerce_targets,
    f_measure,
    reject_with_compat,
    reject_without_compat,
    takes_options_of,
)
from reward_plugins.metrics.lcs import Summary as _Summary
from reward_plugins.metrics.lcs import lcs_indices as lcs_indices
from reward_plugins.metrics.lcs import lcs_length as lcs_length
from reward_plugins.metrics.lcs import position_masks as position_masks
from reward_plugins.metrics.lcs import split_sentences as split_sentences
from reward_plugins.metrics.lcs import summary_level_hits as summary_level_hits
from reward_plugins.metrics.ngrams import NGrams, compiled_ngram_matches, ngram_overlap
from reward_plugins.metrics.ngrams import ngram_matches as ngram_matches
from reward_plugins.metrics.ngrams import ngram_matches_python as ngram_matches_python
from reward_plugins.metrics.ngrams import ngrams as ngrams
from reward_plugins.options import AtLeast, Flag, OneOf

ROUGE_SCORE = "rouge_score"
MEASURES = ("f", "p", "r")
"""``f``: F-measure (beta = 1), ``p``: precision, ``r``: recall."""
ROUGE_SCORE_MAX_N = 9
Measure = Annotated[str, OneOf(MEASURES), "f: F-measure, p: precision, r: recall"]
RougeScorePreset = Annotated[str | None, OneOf((ROUGE_SCORE,)), "reproduce rouge-score"]
UseStemmer = Annotated[bool | None, Flag(), "Porter-stem tokens (compat='rouge_score' only)"]
"""rouge-score names n-gram types ``rouge1`` ... ``rouge9`` only (``rouge10`` is invalid there)."""


class RougeScores(NamedTuple):
    """Precision, recall and F-measure of one prediction against one target."""

    precision: float
    recall: float
    fmeasure: float


Scores = tuple[float, float, float]
"""Precision, recall and F-measure, as a plain tuple inside the hot loop."""
_NONE_SHARED: Scores = (0.0, 0.0, 0.0)
_BOTH_EMPTY: Scores = (1.0, 1.0, 1.0)
_MEASURE_FIELD = {"p": 0, "r": 1, "f": 2}


def _scores(hits: int, predicted_total: int, gold_total: int) -> Scores:
    """Precision, recall and F from counts, each ratio 0 when its denominator is 0.

    The divisions and the F-measure are evaluated as rouge-score does, so the floats agree.
    """
    precision = hits / max(predicted_total, 1)
    recall = hits / max(gold_total, 1)
    return precision, recall, f_measure(precision, recall)


# --- LCS scores (the algorithms: reward_plugins.metrics.lcs) -----------------------------------
def lcs_f_measure(prediction_tokens: list[str], target_tokens: list[str]) -> float:
    """LCS precision/recall F-measure of two non-empty token lists.

    Example:
        >>> lcs_f_measure("the cat sat".split(), "the cat was sitting".split())
        0.5714285714285715
    """
    return _lcs_scores(prediction_tokens, target_tokens)[2]


def _lcs_scores(predicted: list[str], gold: list[str]) -> Scores:
    lcs = lcs_length(predicted, gold)
    if lcs == 0:
        return _NONE_SHARED
    return _scores(lcs, len(predicted), len(gold))


# --- metrics ---------------------------------------------------------------------------------
FeaturesT = TypeVar("FeaturesT")


class RougeMetric(Metric, Generic[FeaturesT]):
    """Shared machinery of the ROUGE metrics: options, empty-input rules, target choice.

    A subclass turns a text into its features and a token count (:meth:`_features`) and scores
    two feature sets with non-empty token lists (:meth:`_pair`). Options common to all:

    Args:
        measure: ``"f"`` (F-measure, default), ``"p"`` (precision) or ``"r"`` (recall).
        normalizer: normalizer name applied before tokenizing, ``none`` by default.
        tokenizer: tokenizer name, ``words`` by default.
        compat: ``"rouge_score"`` to reproduce Google rouge-score (fixes normalizer and tokenizer).
        use_stemmer: with ``compat="rouge_score"`` only: rouge-score's ``use_stemmer`` (needs nltk).
    """

    compat: str | None
    measure: str
    _MEASURE_DEFAULT_IN_SIGNATURE: ClassVar[bool] = True

    def _configure(
        self,
        measure: str,
        normalizer: str | None,
        tokenizer: str | None,
        compat: str | None,
        use_stemmer: bool | None,
    ) -> None:
        """Validate and resolve the common options."""
        self.measure = measure
        self._field = _MEASURE_FIELD[self.measure]
        if compat is not None:
            self.compat = compat
            reject_with_compat(self.name, compat, normalizer=normalizer, tokenizer=tokenizer)
            tokenizer = "rouge_score_porter" if use_stemmer else "rouge_score"
        else:
            reject_without_compat(self.name, use_stemmer=use_stemmer)
            self.compat = None
        self._set_tokenization(normalizer, tokenizer)

    def _tokens(self, text: str) -> list[str]:
        return self._tokenize(self._normalize(text))

    @abstractmethod
    def _features(self, text: str) -> tuple[int, FeaturesT]:
        """The number of tokens of ``text`` and what :meth:`_pair` needs of it."""

    @abstractmethod
    def _pair(self, predicted: FeaturesT, gold: FeaturesT) -> Scores:
        """Scores of a prediction against one target, both with at least one token."""

    def _settings(self) -> str:
        """Settings named in the signature after the metric name (``|n:3``)."""
        return ""

    def _sentence_settings(self) -> str:
        """Settings named at the end of the signature (``|split:newline``)."""
        return ""

    @property
    def signature(self) -> str:
        measure = (
            f"|measure:{self.measure}"
            if self.measure != "f" or self._MEASURE_DEFAULT_IN_SIGNATURE
            else ""
        )
        compat = f"|compat:{self.compat}" if self.compat else ""
        return (
            f"{self.name}{self._settings()}{measure}{compat}|norm:{self.normalizer}"
            f"|tok:{self.tokenizer}{self._sentence_settings()}"
        )

    def target_scores(self, prediction: str, targets: Targets) -> RougeScores:
        """Precision, recall and F-measure against the target with the best F-measure.

        The first target wins a tie, as ``numpy.argmax`` in rouge-score's ``score_multi``.

        Example:
            >>> Rouge1().target_scores("a b", ["a c", "a b c d"])
            RougeScores(precision=1.0, recall=0.5, fmeasure=0.6666666666666666)
        """
        check_prediction(prediction, self.name)
        return RougeScores(*self._best(prediction, coerce_targets(targets, self.name)))

    def _best(self, prediction: str, targets: tuple[str, ...]) -> Scores:
        count, predicted = self._features(prediction)
        best: Scores | None = None
        for target in targets:
            gold_count, gold = self._features(target)
            if count and gold_count:
                scores = self._pair(predicted, gold)
            elif not count and not gold_count and self.compat is None:
                scores = _BOTH_EMPTY
            else:
                scores = _NONE_SHARED
            if best is None or scores[2] > best[2]:
                best = scores
        assert best is not None  # coerce_targets gives at least one target
        return best

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        return self._best(prediction, targets)[self._field]


class RougeN(RougeMetric[NGrams]):
    """ROUGE-N: clipped n-gram overlap; precision, recall or F-measure, best target by F.

    Args:
        n: the n-gram order, an int >= 1 (at most 9 under ``compat="rouge_score"``, whose types
            are ``rouge1`` ... ``rouge9``). Required.
        measure, normalizer, tokenizer, compat, use_stemmer: as :class:`RougeMetric`.

    Texts with tokens but fewer than ``n`` of them have no n-gram and score 0 against anything
    (only two empty token lists score 1.0 under the default contract).

    Example:
        >>> RougeN(n=3)("the cat sat on the mat", "the cat sat on a mat")
        0.5
        >>> RougeN(n=3, measure="r", compat="rouge_score").signature
        'rouge_n|n:3|measure:r|compat:rouge_score|norm:none|tok:rouge_score'

    Raises:
        InvalidOption: ``n`` missing, not an int (a bool is not), below 1, or above 9 with
            compat; unknown measure, normalizer, tokenizer or compat; normalizer or tokenizer
            given with ``compat``; ``use_stemmer`` given without it or not a bool.
    """

    name = "rouge_n"

    def __init__(
        self,
        *,
        n: Annotated[int | None, AtLeast(1), "the n-gram order (required)"] = None,
        measure: Measure = "f",
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: RougeScorePreset = None,
        use_stemmer: UseStemmer = None,
    ) -> None:
        self._configure(measure, normalizer, tokenizer, compat, use_stemmer)
        self.n = self._check_order(n)

    def _check_order(self, n: int | None) -> int:
        if n is None:
            raise InvalidOption(f"{self.name}: option 'n' is required (the n-gram order, >= 1)")
        order = int(n)  # an int >= 1: checked as declared
        if self.compat is not None and order > ROUGE_SCORE_MAX_N:
            raise InvalidOption(
                f"{self.name}: compat={self.compat!r} supports n from 1 to {ROUGE_SCORE_MAX_N} "
                f"(rouge-score's types rouge1 ... rouge9), got {order}"
            )
        return order

    def _settings(self) -> str:
        return f"|n:{self.n}"

    def _features(self, text: str) -> tuple[int, NGrams]:
        tokens = self._tokens(text)
        return len(tokens), NGrams(tokens, self.n)

    def _pair(self, predicted: NGrams, gold: NGrams) -> Scores:
        if compiled_ngram_matches is None:
            hits = ngram_overlap(predicted, gold)
            return _scores(hits, len(predicted.grams), len(gold.grams))
        n = self.n
        if n > len(predicted.tokens) or n > len(gold.tokens):  # no n-gram on one side
            return _NONE_SHARED
        statistics = compiled_ngram_matches(predicted.tokens, gold.tokens, n)
        return _scores(statistics[-1], statistics[-3], statistics[-2])


class Rouge1(RougeN):
    """ROUGE-1: :class:`RougeN` with ``n=1`` (takes every option but ``n``).

    Example:
        >>> Rouge1()("The cat sat.", ["a cat sat down", "dog"])
        0.5714285714285715
        >>> Rouge1(measure="p", compat="rouge_score").signature
        'rouge_1|n:1|measure:p|compat:rouge_score|norm:none|tok:rouge_score'
    """

    name = "rouge_1"

    def __init__(
        self,
        *,
        measure: Measure = "f",
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: RougeScorePreset = None,
        use_stemmer: UseStemmer = None,
    ) -> None:
        super().__init__(
            n=1,
            measure=measure,
            normalizer=normalizer,
            tokenizer=tokenizer,
            compat=compat,
            use_stemmer=use_stemmer,
        )


class Rouge2(RougeN):
    """ROUGE-2: :class:`RougeN` with ``n=2`` (takes every option but ``n``).

    Example:
        >>> Rouge2(measure="r")("the cat sat", "the cat sat down")
        0.6666666666666666
    """

    name = "rouge_2"

    def __init__(
        self,
        *,
        measure: Measure = "f",
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: RougeScorePreset = None,
        use_stemmer: UseStemmer = None,
    ) -> None:
        super().__init__(
            n=2,
            measure=measure,
            normalizer=normalizer,
            tokenizer=tokenizer,
            compat=compat,
            use_stemmer=use_stemmer,
        )


class RougeL(RougeMetric[list[str]]):
    """ROUGE-L: LCS precision, recall or F-measure, best target by F-measure.

    Args:
        measure, normalizer, tokenizer, compat, use_stemmer: as :class:`RougeMetric`.

    The signature names the measure only when it is not ``"f"`` (so F-measure signatures stay
    as they were before the option existed).

    Example:
        >>> RougeL()("The quick brown dog jumps on the log.",
        ...          "The quick brown fox jumps over the lazy dog")
        0.5882352941176471
        >>> RougeL(compat="rouge_score", use_stemmer=True).signature
        'rouge_l|compat:rouge_score|norm:none|tok:rouge_score_porter'
        >>> RougeL(measure="r").signature
        'rouge_l|measure:r|norm:none|tok:words'

    Raises:
        InvalidOption: unknown measure, normalizer, tokenizer or compat; normalizer or
            tokenizer given with ``compat``; ``use_stemmer`` given without it or not a bool.
        ImportError: ``use_stemmer=True`` and nltk is not installed (raised when scoring).
    """

    name = "rouge_l"
    _MEASURE_DEFAULT_IN_SIGNATURE = False

    def __init__(
        self,
        *,
        measure: Measure = "f",
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: RougeScorePreset = None,
        use_stemmer: UseStemmer = None,
    ) -> None:
        self._configure(measure, normalizer, tokenizer, compat, use_stemmer)

    def _features(self, text: str) -> tuple[int, list[str]]:
        tokens = self._tokens(text)
        return len(tokens), tokens

    def _pair(self, predicted: list[str], gold: list[str]) -> Scores:
        return _lcs_scores(predicted, gold)


class RougeLsum(RougeMetric[_Summary]):
    """ROUGE-Lsum: summary-level (union) LCS over newline-separated sentences, best target by F.

    Args:
        split_summaries: with ``compat="rouge_score"`` only; ``False`` (rouge-score's default:
            sentences are the non-empty lines) is the one value accepted. rouge-score's ``True``
            re-splits with nltk's punkt sentence model, a data download that is not part of nltk,
            so it is refused rather than approximated.
        measure, normalizer, tokenizer, compat, use_stemmer: as :class:`RougeMetric`.

    The normalizer and tokenizer apply to each line on its own. Hits are counted as in
    rouge-score's ``_summary_level_lcs``; precision is hits over all prediction tokens and
    recall hits over all target tokens.

    Example:
        >>> RougeLsum(measure="r")("w1 w2 w6 w7 w8\\nw1 w3 w8 w9 w5", "w1 w2 w3 w4 w5")
        0.8
        >>> RougeLsum(compat="rouge_score").signature
        'rouge_lsum|measure:f|compat:rouge_score|norm:none|tok:rouge_score|split:newline'

    Raises:
        InvalidOption: as :class:`RougeL`; ``split_summaries`` given without ``compat``, not a
            bool, or ``True``.
    """

    name = "rouge_lsum"

    def __init__(
        self,
        *,
        measure: Measure = "f",
        normalizer: str | None = None,
        tokenizer: str | None = None,
        compat: RougeScorePreset = None,
        use_stemmer: UseStemmer = None,
        split_summaries: Annotated[bool | None, Flag(), "split at sentences (unsupported)"] = None,
    ) -> None:
        self._configure(measure, normalizer, tokenizer, compat, use_stemmer)
        if compat is None:
            reject_without_compat(self.name, split_summaries=split_summaries)
        elif split_summaries:
            raise InvalidOption(
                f"{self.name}: split_summaries=True is not supported: rouge-score then splits "
                "sentences with nltk's punkt model (nltk.sent_tokenize), data that nltk does not "
                "ship and that is never downloaded here; put one sentence per line and leave "
                "split_summaries False"
            )
        self.split_summaries = False

    def _sentence_settings(self) -> str:
        return "|split:newline"

    def _features(self, text: str) -> tuple[int, _Summary]:
        sentences = [self._tokens(line) for line in split_sentences(text)]
        counts: Counter[str] = Counter()
        for sentence in sentences:
            counts.update(sentence)
        total = sum(map(len, sentences))
        return total, _Summary(sentences, [position_masks(s) for s in sentences], counts, total)

    def _pair(self, predicted: _Summary, gold: _Summary) -> Scores:
        return _scores(summary_level_hits(gold, predicted), predicted.total, gold.total)


# --- free functions --------------------------------------------------------------------------
@takes_options_of(RougeN)
def rouge_n(prediction: str, targets: Targets, **options: Any) -> float:
    """ROUGE-N of order ``n`` (required), best target by F. See :class:`RougeN` for the options.

    Example:
        >>> rouge_n("a b c d", "a b x d", n=2, measure="p")
        0.3333333333333333
    """
    return RougeN(**options)(prediction, targets)


@takes_options_of(Rouge1)
def rouge_1(prediction: str, targets: Targets, **options: Any) -> float:
    """ROUGE-1, best target by F. See :class:`RougeN` for the options.

    Example:
        >>> rouge_1("testing", "testing one two", measure="r", compat="rouge_score")
        0.3333333333333333
    """
    return Rouge1(**options)(prediction, targets)


@takes_options_of(Rouge2)
def rouge_2(prediction: str, targets: Targets, **options: Any) -> float:
    """ROUGE-2, best target by F. See :class:`RougeN` for the options.

    Example:
        >>> rouge_2("testing one", "testing one two", compat="rouge_score")
        0.6666666666666666
    """
    return Rouge2(**options)(prediction, targets)


@takes_options_of(RougeL)
def rouge_l(prediction: str, targets: Targets, **options: Any) -> float:
    """ROUGE-L, best target by F. See :class:`RougeL` for the options.

    Example:
        >>> rouge_l("a b c", ["c b a", "a x c"])
        0.6666666666666666
    """
    return RougeL(**options)(prediction, targets)


@takes_options_of(RougeLsum)
def rouge_lsum(prediction: str, targets: Targets, **options: Any) -> float:
    """ROUGE-Lsum, best target by F. See :class:`RougeLsum` for the options.

    Example:
        >>> rouge_lsum("Second sentence.\\nFirst sentence.", "First sentence.\\nSecond sentence.")
        1.0
    """
    return RougeLsum(**options)(prediction, targets)


ROUGE_METRICS = (Rouge1, Rouge2, RougeN, RougeL, RougeLsum)
"""The ROUGE metric classes, in the order the metric table lists them."""
