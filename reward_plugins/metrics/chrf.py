"""chrF and chrF++ at sentence and corpus level, exactly as sacrebleu 2.6.0 computes them.

chrF (Popović 2015) is the F-beta score of character n-gram precision and recall, averaged over
the orders 1..``char_order``; chrF++ (Popović 2017) adds word n-grams of orders
1..``word_order`` (``word_order=2``). sacrebleu defines the metric's details, and this module
reproduces them bit for bit (``sentence_chrf(...).score / 100`` and ``corpus_chrf(...).score /
100``):

- characters: the text (lower-cased with ``lowercase``) with its whitespace removed, unless
  ``whitespace``; words (chrF++): ``str.split()`` tokens, and a word longer than one character
  loses one ASCII punctuation character at its end, or else at its start, as a token of its own;
- statistics per order: prediction n-grams (counted as 0 when the reference has no n-gram of that
  order), reference n-grams, and matches (the minimum of the two counts, n-gram by n-gram);
- score: by default the F-beta of the precision and recall averaged over the orders that both
  sides have (``eff:yes`` in the signature); with ``eps_smoothing`` the mean over all orders of
  the per-order F-beta, 1e-16 standing in for an undefined value (chrF++.py, Moses, NLTK);
- several references: the sentence takes the statistics of the reference with the highest score,
  the first one on a tie; a corpus sums those statistics over sentences.

There is no separate default contract: ``compat=None`` and ``compat="sacrebleu"`` give the same
numbers and the same signature, e.g. ``chrf|nc:6|nw:0|beta:2|case:mixed|eff:yes|space:no``.

Corpus statistics: :meth:`Chrf.sentence_statistics` gives sacrebleu's vector of ``[prediction
n-grams, reference n-grams, matches]`` per order (characters first, then words; int64) and
:meth:`Chrf.score_from_statistics` the score of a summed vector, so that
``score_from_statistics(sum of sentence_statistics)`` equals :meth:`Chrf.corpus_score`.

Speed: where the package was built with a C compiler, each prediction-reference pair is counted by
``reward_plugins._speedups.ngram_matches`` (:func:`reward_plugins.metrics.ngrams.ngram_matches`:
one hash-table pass per order, every order's counts in one call). Without it, n-grams are coded as
integers in base V (V the alphabet of the call: code points, or word ids) with every digit >= 1, so
codes of different orders differ too; the codes of a prediction and a reference are sorted together
once, and the matches of every order follow from the group sizes (min(h, r) = (h + r - |h - r|) / 2)
without a Python loop per n-gram. Where V**order would overflow int64, ``Counter`` over string
slices counts instead (same numbers).

References:
    Popović 2015, "chrF: character n-gram F-score for automatic MT evaluation"; Popović 2017,
    "chrF++: words helping character n-grams"; sacrebleu 2.6.0 (github.com/mjpost/sacrebleu)
    ``sacrebleu/metrics/chrf.py``, ``sacrebleu/metrics/helpers.py`` and ``sacrebleu/compat.py``
    (``sentence_chrf``, ``corpus_chrf``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import accumulate
from typing import Annotated, Any

import numpy as np

from reward_plugins.errors import InvalidOption
from reward_plugins.metrics.base import (
    Metric,
    Targets,
    check_prediction,
    coerce_targets,
    corpus_from_statistics,
    statistics_vector,
    takes_options_of,
)
from reward_plugins.metrics.ngrams import clipped_overlap, compiled_ngram_matches, ngram_counts
from reward_plugins.options import Flag, IntIn, OneOf

SACREBLEU = "sacrebleu"
CHAR_ORDERS = range(0, 11)
"""Valid ``char_order`` values (0 only with word n-grams)."""
WORD_ORDERS = range(0, 7)
"""Valid ``word_order`` values (2 is chrF++)."""
BETAS = range(1, 11)
"""Valid ``beta`` values (recall weighs ``beta`` times as much as precision)."""
_HASHED_COST_TEXT = 33  # Counter's fixed cost per text, in units of its cost per n-gram
_HASHED_COST_LIMIT = 200  # numpy's fixed cost in the same units
EPSILON = 1e-16
"""sacrebleu's stand-in for an undefined precision, recall or F-score under ``eps_smoothing``."""
PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
"""The ASCII punctuation that chrF++ splits off a word's end or start."""


def chrf_words(text: str) -> list[str]:
    """chrF++'s word tokens: ``str.split()``, then punctuation split off words (sacrebleu's rule).

    A word longer than one character that ends with ASCII punctuation gives the rest and that
    character; otherwise, one that starts with it gives that character and the rest. Only one
    character comes off (so ``"(hi)"`` gives ``"(hi"`` and ``")"``).

    Example:
        >>> chrf_words("Hello, (world) ok!")
        ['Hello', ',', '(world', ')', 'ok', '!']
    """
    words: list[str] = []
    for word in text.split():
        if len(word) > 1:
            if word[-1] in PUNCTUATION:
                words += (word[:-1], word[-1])
                continue
            if word[0] in PUNCTUATION:
                words += (word[0], word[1:])
                continue
        words.append(word)
    return words


def _matches_coded(
    values: np.ndarray, lengths: list[int], top: int, max_order: int
) -> list[list[int]] | None:
    """Per reference, its n-gram matches with the prediction for orders 1..``max_order``.

    ``values`` holds the symbols (ints in 0..``top``) of the prediction and then each reference,
    with one free slot after each text; ``lengths`` the texts' lengths. Returns ``None`` when the
    codes would overflow int64.

    How: symbol s becomes the digit s + T + 1 (T texts) and the slot after text t the digit t + 1,
    a sentinel; the n-gram starting at each position gets the code of its digits in base
    ``top + T + 2`` (every digit >= 1, so an order-n code lies in [base**(n-1), base**n) and
    orders never share a code), shifted left to make room for the number of the text it starts
    in (T for a sentinel). An n-gram that runs past its text's end holds that text's sentinel,
    so no other text has its code. After one sort, equal
    keys form runs (an n-gram's count in one text), runs of one code form a group with the
    prediction's run first, and each reference's run matches min(its count, the prediction's).
    """
    count = len(lengths)
    shift = count.bit_length()  # 2**shift > count: room for text numbers 0..count
    base = top + count + 2
    if base**max_order << shift >= 2**63:
        return None
    size = len(values)
    slots = [end - 1 for end in accumulate(length + 1 for length in lengths)]
    digits = np.empty(size + max_order - 1, dtype=np.int64)
    np.add(values, count + 1, out=digits[:size])
    digits[size:] = count
    digits[slots] = range(1, count + 1)
    owner = np.repeat(np.arange(count), [length + 1 for length in lengths])
    owner[slots] = count
    keys = np.empty((max_order, size), dtype=np.int64)
    keys[0] = digits[:size]
    for order in range(1, max_order):  # Horner: one more digit per order
        np.multiply(keys[order - 1], base, out=keys[order])
        keys[order] += digits[order : order + size]
    keys <<= shift
    keys |= owner
    flat = keys.ravel()
    flat.sort()
    run_starts = np.empty(len(flat) + 1, dtype=bool)
    run_starts[0] = run_starts[-1] = True
    np.not_equal(flat[1:], flat[:-1], out=run_starts[1:-1])
    bounds = np.flatnonzero(run_starts)
    run_lengths = bounds[1:] - bounds[:-1]
    run_keys = flat[bounds[:-1]]
    run_texts = run_keys & ((1 << shift) - 1)
    run_codes = run_keys >> shift
    group_starts = np.empty(len(run_codes), dtype=bool)
    group_starts[0] = True
    np.not_equal(run_codes[1:], run_codes[:-1], out=group_starts[1:])
    firsts = np.flatnonzero(group_starts)
    predicted = np.where(run_texts[firsts] == 0, run_lengths[firsts], 0)
    matched = np.minimum(run_lengths, predicted[np.cumsum(group_starts) - 1])
    powers = np.array([base**order for order in range(1, max_order)], dtype=np.int64)
    orders = np.searchsorted(powers, run_codes, side="right")
    sums = np.bincount((orders << shift) | run_texts, weights=matched, minlength=max_order << shift)
    table = sums.reshape(max_order, 1 << shift)[:, 1:count]
    return table.T.astype(np.int64).tolist()


def _matches_hashed(texts: Sequence[Sequence[Hashable]], max_order: int) -> list[list[int]]:
    """:func:`_matches_coded` with ``Counter`` (for alphabets too large for int64 codes)."""
    predicted = [ngram_counts(texts[0], order) for order in range(1, max_order + 1)]
    return [
        [
            clipped_overlap(prediction, ngram_counts(reference, order))
            for order, prediction in enumerate(predicted, start=1)
        ]
        for reference in texts[1:]
    ]


def _symbols(texts: Sequence[str] | Sequence[list[str]]) -> np.ndarray:
    """The symbols of all texts, a free slot (0) after each: code points, or word ids from 1."""
    if isinstance(texts[0], str):
        joined = "\0".join(texts) + "\0"  # type: ignore[arg-type]
        # A lone surrogate is a character like any other to sacrebleu; keep its code point.
        return np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ids: dict[str, int] = {}
    intern = ids.setdefault
    symbols: list[int] = []
    for words in texts:
        symbols += [intern(word, len(ids) + 1) for word in words]
        symbols.append(0)
    return np.array(symbols, dtype=np.int64)


def _matches(texts: Sequence[str] | Sequence[list[str]], max_order: int) -> list[list[int]]:
    """Per reference, the n-gram matches of orders 1..``max_order`` with the prediction.

    ``texts[0]`` is the prediction and the rest the references: strings (character n-grams) or
    word lists (word n-grams). Symbols are numbered densely first when their codes would
    overflow int64, and counted with ``Counter`` if they still would. Very short inputs take
    ``Counter`` directly: below the crossover measured when this was written, numpy's fixed
    cost per call (about 30 us) exceeds ``Counter``'s (about 5 us per text plus 0.15 us per
    n-gram).
    """
    if max_order == 0:
        return [[] for _ in texts[1:]]
    lengths = [len(text) for text in texts]
    if _HASHED_COST_TEXT * len(texts) + max_order * sum(lengths) < _HASHED_COST_LIMIT:
        return _matches_hashed(texts, max_order)
    values = _symbols(texts)
    matches = _matches_coded(values, lengths, int(values.max()), max_order)
    if matches is None:
        alphabet, dense = np.unique(values, return_inverse=True)
        matches = _matches_coded(dense, lengths, len(alphabet) - 1, max_order)
    if matches is None:
        matches = _matches_hashed(texts, max_order)
    return matches


def _pair_statistics(
    predicted: str | list[str], gold: str | list[str], max_order: int
) -> list[int]:
    """``[prediction n-grams, reference n-grams, matches]`` per order 1..``max_order`` of one pair
    (compiled counts), with sacrebleu's rule that an order the reference lacks counts no
    prediction n-gram."""
    statistics = list(compiled_ngram_matches(predicted, gold, max_order))
    for order in range(len(gold) + 1, max_order + 1):
        statistics[3 * order - 3] = 0
    return statistics


def chrf_from_statistics(statistics: Sequence[int], beta: int, eps_smoothing: bool) -> float:
    """chrF on sacrebleu's 0-100 scale from ``[prediction, reference, matches]`` per order.

    Without ``eps_smoothing``: precision and recall averaged over the orders where both sides
    have n-grams, then F-beta; 0.0 when no order counts. With it: the mean over all orders of the
    per-order F-beta, with 1e-16 for an undefined precision, recall or F-beta. The float
    operations are sacrebleu's, in its order.

    Example:
        >>> chrf_from_statistics([2, 2, 1], beta=2, eps_smoothing=False)
        50.0
    """
    factor = beta**2
    orders = len(statistics) // 3
    if eps_smoothing:
        total = 0.0
        for index in range(orders):
            predicted, referenced, matched = statistics[3 * index : 3 * index + 3]
            precision = matched / predicted if predicted > 0 else EPSILON
            recall = matched / referenced if referenced > 0 else EPSILON
            denominator = factor * precision + recall
            total += (1 + factor) * precision * recall / denominator if denominator > 0 else EPSILON
        return 100 * total / orders
    precision_sum, recall_sum, effective = 0.0, 0.0, 0
    for index in range(orders):
        predicted, referenced, matched = statistics[3 * index : 3 * index + 3]
        if predicted > 0 and referenced > 0:
            precision_sum += matched / predicted
            recall_sum += matched / referenced
            effective += 1
    if effective == 0:
        return 0.0
    precision, recall = precision_sum / effective, recall_sum / effective
    if not precision + recall:
        return 0.0
    score = (1 + factor) * precision * recall
    score /= factor * precision + recall
    return 100 * score


class Chrf(Metric):
    """Sentence chrF / chrF++ (and corpus chrF through :meth:`corpus_score`), as sacrebleu.

    Args:
        char_order: character n-gram orders 1..``char_order``, an int in 0..10 (default 6).
        word_order: word n-gram orders 1..``word_order``, an int in 0..6 (default 0; 2 is
            chrF++); ``char_order + word_order`` must be at least 1.
        beta: recall weighs ``beta`` times as much as precision, an int in 1..10 (default 2).
        lowercase: lower-case prediction and references first (default ``False``).
        whitespace: keep whitespace in character n-grams (default ``False``).
        eps_smoothing: average per-order F-scores with 1e-16 smoothing (chrF++.py, Moses,
            NLTK) instead of sacrebleu's default effective-order averaging (default ``False``).
        compat: ``None`` or ``"sacrebleu"``, the same metric (chrF is sacrebleu's definition).

    Example:
        >>> Chrf()("the cat sat on the mat", ["the cat sat on a mat"])
        0.720848317308462
        >>> Chrf(word_order=2).signature
        'chrf|nc:6|nw:2|beta:2|case:mixed|eff:yes|space:no'

    Raises:
        InvalidOption: an order or ``beta`` that is not an int in range (bools refused), both
            orders 0, a flag that is not a bool, or an unknown ``compat``.
    """

    name = "chrf"

    def __init__(
        self,
        *,
        char_order: Annotated[int, IntIn(CHAR_ORDERS.start, CHAR_ORDERS.stop - 1)] = 6,
        word_order: Annotated[int, IntIn(WORD_ORDERS.start, WORD_ORDERS.stop - 1)] = 0,
        beta: Annotated[int, IntIn(BETAS.start, BETAS.stop - 1)] = 2,
        lowercase: Annotated[bool, Flag()] = False,
        whitespace: Annotated[bool, Flag()] = False,
        eps_smoothing: Annotated[bool, Flag()] = False,
        compat: Annotated[str | None, OneOf((SACREBLEU,))] = None,
    ) -> None:
        self.char_order = char_order
        self.word_order = word_order
        if char_order + word_order == 0:
            raise InvalidOption(f"{self.name}: char_order and word_order are both 0")
        self.beta = beta
        self.lowercase = lowercase
        self.whitespace = whitespace
        self.eps_smoothing = eps_smoothing
        self.compat = compat

    @property
    def signature(self) -> str:
        return (
            f"{self.name}|nc:{self.char_order}|nw:{self.word_order}|beta:{self.beta}"
            f"|case:{'lc' if self.lowercase else 'mixed'}"
            f"|eff:{'no' if self.eps_smoothing else 'yes'}"
            f"|space:{'yes' if self.whitespace else 'no'}"
        )

    def _characters(self, text: str) -> str:
        return text if self.whitespace else "".join(text.split())

    def _candidate_statistics(self, prediction: str, targets: tuple[str, ...]) -> list[list[int]]:
        """One statistics list per target (sacrebleu's layout)."""
        if self.lowercase:
            prediction, targets = prediction.lower(), tuple(target.lower() for target in targets)
        if compiled_ngram_matches is not None:
            return self._compiled_statistics(prediction, targets)
        texts = [prediction, *targets]
        characters = [self._characters(text) for text in texts]
        rows: list[list[int]] = [[] for _ in targets]
        lengths = [len(text) for text in characters]
        self._add_order_statistics(
            rows, _matches(characters, self.char_order), lengths, self.char_order
        )
        if self.word_order:
            words = [chrf_words(text) for text in texts]
            lengths = [len(text) for text in words]
            self._add_order_statistics(
                rows, _matches(words, self.word_order), lengths, self.word_order
            )
        return rows

    def _compiled_statistics(self, prediction: str, targets: tuple[str, ...]) -> list[list[int]]:
        """:meth:`_candidate_statistics` of (lower-cased) texts, pair by pair in C."""
        characters = self._characters(prediction)
        words = chrf_words(prediction) if self.word_order else None
        rows = []
        for target in targets:
            row = _pair_statistics(characters, self._characters(target), self.char_order)
            if words is not None:
                row += _pair_statistics(words, chrf_words(target), self.word_order)
            rows.append(row)
        return rows

    @staticmethod
    def _add_order_statistics(
        rows: list[list[int]], matches: list[list[int]], lengths: list[int], max_order: int
    ) -> None:
        """Append ``[prediction n-grams, reference n-grams, matches]`` per order to each row."""
        for row, matched, reference_length in zip(rows, matches, lengths[1:], strict=True):
            for order in range(1, max_order + 1):
                referenced = max(0, reference_length - order + 1)
                # sacrebleu counts no prediction n-gram of an order the reference lacks.
                predicted = max(0, lengths[0] - order + 1) if referenced else 0
                row += (predicted, referenced, matched[order - 1])

    def _best(self, prediction: str, targets: tuple[str, ...]) -> tuple[list[int], float]:
        """The statistics of the target with the highest score (the first on a tie), the score."""
        best: list[int] = []
        best_score = -1.0
        for statistics in self._candidate_statistics(prediction, targets):
            value = chrf_from_statistics(statistics, self.beta, self.eps_smoothing)
            if value > best_score:
                best, best_score = statistics, value
        return best, best_score

    def _score(self, prediction: str, targets: tuple[str, ...]) -> float:
        return min(1.0, self._best(prediction, targets)[1] / 100)

    def sentence_statistics(self, prediction: str, targets: Targets) -> np.ndarray:
        """The statistics of the best target (as sacrebleu picks it), for corpus scores.

        ``[prediction n-grams, reference n-grams, matches]`` per order, characters first, then
        words; int64. :meth:`score_from_statistics` of one sentence's vector is its score.

        Example:
            >>> Chrf(char_order=2).sentence_statistics("ab", ["abc", "b"])
            array([2, 1, 1, 0, 0, 0])

        Raises:
            InvalidInput: as for calling the metric.
        """
        check_prediction(prediction, self.name)
        statistics, _ = self._best(prediction, coerce_targets(targets, self.name))
        return np.array(statistics, dtype=np.int64)

    def score_from_statistics(self, statistics: np.ndarray) -> float:
        """The score of a (summed) vector of :meth:`sentence_statistics`; in [0, 1].

        Example:
            >>> metric = Chrf(char_order=2)
            >>> metric.score_from_statistics(metric.sentence_statistics("ab", ["abc", "b"]))
            0.8333333333333335

        Raises:
            InvalidInput: not a 1-D vector of 3 * (``char_order`` + ``word_order``) counts.
        """
        length = 3 * (self.char_order + self.word_order)
        counts = statistics_vector(statistics, length, self.name)
        return min(1.0, chrf_from_statistics(counts, self.beta, self.eps_smoothing) / 100)

    def corpus_score(self, predictions: Sequence[str], references: Sequence[Targets]) -> float:
        """Corpus chrF: each sentence's best-target statistics summed, then scored.

        ``references[i]`` is the target or list of targets of ``predictions[i]``; equals
        ``sacrebleu.corpus_chrf(predictions, streams, ...).score / 100`` with ``streams[k][i]``
        the k-th reference of prediction i (``None`` where it has fewer).

        Raises:
            InvalidInput: ``predictions`` and ``references`` differ in length, or a row is not
                a string or has no reference (the message names the row).
        """
        width = 3 * (self.char_order + self.word_order)
        return corpus_from_statistics(self, predictions, references, width)


@takes_options_of(Chrf)
def chrf(prediction: str, targets: Targets, **options: Any) -> float:
    """Sentence chrF (chrF++ with ``word_order=2``) on a 0-1 scale. See :class:`Chrf`.

    Example:
        >>> chrf("the cat sat on the mat", ["the cat sat on a mat"], word_order=2)
        0.7203039245302905
    """
    return Chrf(**options)(prediction, targets)


@takes_options_of(Chrf)
def corpus_chrf(predictions: Sequence[str], references: Sequence[Targets], **options: Any) -> float:
    """Corpus chrF on a 0-1 scale; ``references[i]`` holds the reference(s) of prediction i.

    Equals ``sacrebleu.corpus_chrf(predictions, streams, ...).score / 100`` (``streams[k][i]``
    the k-th reference of prediction i). See :class:`Chrf` for the options.

    Example:
        >>> corpus_chrf(["the cat sat", "hello"], [["the cat sat"], ["hello there"]])
        0.670163869199753
    """
    return Chrf(**options).corpus_score(predictions, references)
