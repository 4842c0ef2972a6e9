"""N-gram helpers shared by the metrics: n-grams of a token list or a string, their counts, and
clipped matches (the sum over n-grams of the smaller of two counts).

ROUGE-N, chrF and BLEU all count clipped n-gram matches between a prediction and a reference;
they differ in what they do with the counts, not in how they count, so the counting lives
here once:

- :func:`ngrams` and :func:`ngram_counts`: the n-grams of one order (tokens for n = 1, tuples
  above; substrings for a ``str`` in :func:`ngram_counts`) and their counts;
- :func:`clipped_overlap`: the clipped matches of two counts (BLEU's and chrF's ``Counter``
  paths);
- :class:`NGrams` and :func:`ngram_overlap`: n-grams listed and counted once per text, and their
  clipped overlap without a Python loop per n-gram (ROUGE-N);
- :func:`ngram_matches`: counts and clipped matches of every order 1..N of a pair at once,
  ``reward_plugins._speedups.ngram_matches`` where the package was built with a C compiler
  (:data:`compiled_ngram_matches`, ``None`` without it), else :func:`ngram_matches_python`,
  its reference (ROUGE-N, chrF).

References:
    Lin 2004, "ROUGE" (clipped n-gram overlap); Papineni et al. 2002, "BLEU" (clipped
    precision); Popović 2015, "chrF"; sacrebleu 2.6.0 (github.com/mjpost/sacrebleu)
    ``sacrebleu/metrics/helpers.py`` (``extract_all_char_ngrams``, ``extract_word_ngrams``).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from itertools import pairwise, repeat

try:  # the C twin of ngram_matches_python, built at install time where a compiler is available
    from reward_plugins._speedups import ngram_matches as compiled_ngram_matches
except ImportError:
    compiled_ngram_matches = None


def ngrams(tokens: Sequence[Hashable], n: int) -> Sequence[Hashable]:
    """The n-grams of ``tokens`` in order: the tokens themselves for n = 1, tuples above.

    ``zip`` over shifted lists builds the tuples in C.

    Example:
        >>> ngrams("a b c".split(), 2)
        [('a', 'b'), ('b', 'c')]
    """
    if n == 1:
        return tokens
    if n == 2:  # the common case, without the generator's fixed cost
        return list(pairwise(tokens))
    return list(zip(*(tokens[offset:] for offset in range(n)), strict=False))


class NGrams:
    """The n-grams of one text in order (:func:`ngrams`), listed and counted on first use."""

    __slots__ = ("_counts", "_grams", "n", "tokens")

    def __init__(self, tokens: Sequence[Hashable], n: int) -> None:
        self.tokens = tokens
        self.n = n
        self._grams: Sequence[Hashable] | None = None
        self._counts: Counter[Hashable] | None = None

    @property
    def grams(self) -> Sequence[Hashable]:
        """The n-grams in order (listed once)."""
        if self._grams is None:
            self._grams = ngrams(self.tokens, self.n)
        return self._grams

    @property
    def counts(self) -> Counter[Hashable]:
        """Count per distinct n-gram (computed once)."""
        if self._counts is None:
            self._counts = Counter(self.grams)
        return self._counts


def ngram_overlap(predicted: NGrams, gold: NGrams) -> int:
    """Clipped overlap of two n-gram multisets: the sum over n-grams of the smaller count.

    Every step runs over whole collections inside ``Counter``, ``map``, ``filter`` or a set
    intersection (C, no Python loop per n-gram). Unigrams (strings, cheap to count) are counted
    on both sides, so a prediction's counts serve every target; longer n-grams are mostly not
    shared, so only the predicted n-grams that ``gold`` has are counted. When one side repeats
    no (shared) n-gram, the overlap is the number of shared n-grams.

    Example:
        >>> ngram_overlap(NGrams(list("aab"), 1), NGrams(list("abbc"), 1))
        2
        >>> ngram_overlap(NGrams(list("aaab"), 1), NGrams(list("aabb"), 1))
        3
        >>> ngram_overlap(NGrams(list("aaab"), 2), NGrams(list("aaab"), 2))
        3
    """
    gold_counts = gold.counts
    gold_repeats = len(gold.grams) != len(gold_counts)
    if predicted.n == 1:
        predicted_counts = predicted.counts
        if not gold_repeats or len(predicted.grams) == len(predicted_counts):
            return len(predicted_counts.keys() & gold_counts.keys())
        small, large = sorted((predicted_counts, gold_counts), key=len)
    else:
        small = Counter(filter(gold_counts.__contains__, predicted.grams))
        shared_total = sum(small.values())
        if not gold_repeats or shared_total == len(small):
            return len(small)
        large = gold_counts
    # min(s, l) = s - max(s - l, 0): subtract the counts on the small side above the large's.
    above = map(operator.sub, small.values(), map(large.get, small, repeat(0)))
    return sum(small.values()) - sum(filter((0).__lt__, above))


def ngram_matches_python(
    predicted: Sequence[Hashable], gold: Sequence[Hashable], max_order: int
) -> tuple[int, ...]:
    """N-gram counts and clipped matches of two sequences for every order n = 1 .. ``max_order``.

    Flat, three numbers per order: ``(predicted n-grams, gold n-grams, matches)`` for n = 1,
    then for n = 2, ... (sacrebleu's chrF layout); a sequence of length L has max(L - n + 1, 0)
    n-grams, and matches is the sum over distinct n-grams of the smaller of their two counts.
    The items are those of the sequences (the characters of a str, the tokens of a list).

    The reference for ``_speedups.ngram_matches``, its C twin (exported here as
    :data:`ngram_matches`), which reads two exact ``str`` or two lists of exact ``str`` and an
    int ``max_order`` >= 0 itself and passes any other arguments here, so that the result, or
    the exception, is this function's.

    Example:
        >>> ngram_matches_python("abcab", "abab", 3)
        (5, 4, 4, 4, 3, 2, 3, 2, 0)
        >>> ngram_matches_python("a b".split(), "b a b".split(), 2)
        (2, 3, 2, 1, 2, 1)
    """
    statistics: list[int] = []
    for order in range(1, max_order + 1):
        predicted_grams, gold_grams = NGrams(predicted, order), NGrams(gold, order)
        statistics += (
            len(predicted_grams.grams),
            len(gold_grams.grams),
            ngram_overlap(predicted_grams, gold_grams),
        )
    return tuple(statistics)


ngram_matches = ngram_matches_python if compiled_ngram_matches is None else compiled_ngram_matches
""":func:`ngram_matches_python`, compiled where the C extension was built."""


def ngram_counts(sequence: Sequence[Hashable], n: int) -> Counter[Hashable]:
    """Counts of the n-grams of one order: substrings of a ``str``, :func:`ngrams` of a list.

    Example:
        >>> ngram_counts("abab", 2)
        Counter({'ab': 2, 'ba': 1})
        >>> ngram_counts(["a", "b", "a", "b"], 3)
        Counter({('a', 'b', 'a'): 1, ('b', 'a', 'b'): 1})
    """
    if isinstance(sequence, str):
        stops = range(n, len(sequence) + 1)
        return Counter(map(sequence.__getitem__, map(slice, range(len(stops)), stops)))
    return Counter(ngrams(sequence, n))


def clipped_overlap(counts: Mapping[Hashable, int], reference: Mapping[Hashable, int]) -> int:
    """The sum over the n-grams of ``counts`` that ``reference`` has of the smaller count.

    ``filter`` and ``map`` run in C: no Python loop per n-gram.

    Example:
        >>> clipped_overlap(Counter("aab"), Counter("abbc"))
        2
    """
    common = list(filter(reference.__contains__, counts))
    return sum(map(min, map(counts.__getitem__, common), map(reference.__getitem__, common)))
