"""Paired significance tests: is system B's score really different from system A's?

Two tests, as sacrebleu 2.6.0 runs them (``sacrebleu/significance.py``: ``PairedTest``,
``_paired_bs_test``, ``_paired_ar_test``, ``_compute_p_value``, ``estimate_ci``), with the same
random draws for the same seed:

- ``bootstrap`` (paired bootstrap resampling, Koehn 2004): ``samples`` resamples of the rows
  with replacement (``numpy.random.default_rng(seed).choice(n, (samples, n))``), the same rows
  for both systems. The statistic of a resample is ``|score_b - score_a|`` minus its mean over
  the resamples; the p-value counts the resamples whose statistic exceeds the observed
  ``|score_b - score_a|``. Each system also gets the mean of its resampled scores and the
  half-width of their 95% interval (sorted scores ``n // 40`` from each end), as sacrebleu's
  ``mean`` and ``ci``.
- ``ar`` (paired approximate randomization, Riezler and Maxwell 2005): ``samples`` trials,
  each swapping the outputs of A and B on the rows where
  ``default_rng(seed).integers(2, size=(samples, n), dtype=bool)`` is False; the p-value counts
  the trials whose ``|score_a' - score_b'|`` exceeds the observed difference.

Both p-values are ``(count + 1) / (samples + 1)`` (multeval's rule, kept by sacrebleu), so a
p-value is never 0.

A corpus metric, one exposing ``sentence_statistics``/``score_from_statistics`` (BLEU, chrF),
is scored from summed per-row statistics, as sacrebleu does: float32 sums for the bootstrap,
integer sums for AR; the count is sacrebleu's, of differences strictly above the observed one
(so a system compared with itself gets ``1 / (samples + 1)``). Every other metric is scored as
the mean of its sentence scores (:func:`paired_test_values`), and there the count is of
differences at least as large as the observed one (Riezler and Maxwell's rule), with equality
up to the rounding error of the sums: with discrete values (0/1 rewards) many trials tie with
the observed difference, and counting ties as not exceeding it, as sacrebleu does, would make
the p-value small for two systems that differ on a handful of rows (and for identical ones).

Differences from sacrebleu: scores are on the 0-1 scale (sacrebleu's 0-100 divided by 100);
``seed=0`` is a seed (sacrebleu draws unseeded for 0) and ``seed=None`` draws unseeded; the
seed is an argument, not the ``SACREBLEU_SEED`` variable; AR gives no confidence interval
(sacrebleu's ``n_ar_confidence`` is off by default). Under NumPy 2, sacrebleu scores its float32
bootstrap sums in float32 arithmetic; BLEU and chrF here score the same whole counts in float64,
so bootstrap means and intervals agree with sacrebleu's to about 1e-8 (the p-values are the
same in the tests).

References:
    Koehn 2004, "Statistical Significance Tests for Machine Translation Evaluation";
    Riezler and Maxwell 2005, "On Some Pitfalls in Automatic Evaluation and Significance
    Testing for MT"; github.com/mjpost/sacrebleu, ``sacrebleu/significance.py``;
    github.com/jhclark/multeval, ``StratifiedApproximateRandomizationTest.java``.
"""

from __future__ import annotations

import array
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from reward_plugins.errors import InvalidInput, InvalidOption
from reward_plugins.metrics.base import CorpusMetric, Metric, Targets
from reward_plugins.metrics.dispatch import get_metric

METHODS: tuple[str, ...] = ("bootstrap", "ar")
DEFAULT_SAMPLES: dict[str, int] = {"bootstrap": 1000, "ar": 10000}
"""sacrebleu's defaults: 1000 bootstrap resamples, 10000 randomization trials."""
DEFAULT_SEED = 12345
"""sacrebleu's default seed (its ``SACREBLEU_SEED``)."""

_CHUNK_CELLS = 1 << 22
"""Random draws are made in blocks of about this many cells (rows x samples), so memory stays
bounded; blocks draw the same numbers as one call (AR blocks are whole multiples of 32 rows:
numpy draws 32 booleans per 32-bit word and starts a fresh word at each call)."""


class PairedResult(NamedTuple):
    """The outcome of a paired test of system B against system A (the baseline).

    ``difference`` is ``score_b - score_a``. ``mean_*`` and ``ci_*`` are the mean of the
    bootstrap scores of each system and the half-width of their 95% interval (``None`` for
    ``ar``), as sacrebleu reports them.
    """

    metric: str
    """The metric's signature (``mean`` for :func:`paired_test_values`)."""
    method: str
    score_a: float
    score_b: float
    difference: float
    p_value: float
    samples: int
    seed: int | None
    mean_a: float | None = None
    ci_a: float | None = None
    mean_b: float | None = None
    ci_b: float | None = None


def paired_test(
    metric: str | Metric,
    predictions_a: Sequence[str],
    predictions_b: Sequence[str],
    targets: Sequence[Targets],
    *,
    method: str = "bootstrap",
    samples: int | None = None,
    seed: int | None = DEFAULT_SEED,
    **options: object,
) -> PairedResult:
    """Test whether systems A and B score differently under ``metric`` on the same rows.

    Args:
        metric: a metric name (built with ``options`` through :func:`get_metric`) or a built
            metric. A corpus metric (``sentence_statistics``/``score_from_statistics``) is
            scored from summed statistics as sacrebleu does; any other metric's corpus score is
            the mean of its sentence scores.
        predictions_a: the baseline's outputs, one per row.
        predictions_b: the other system's outputs, one per row.
        targets: ``targets[i]``, the target or list of targets of row ``i``.
        method: ``bootstrap`` (paired bootstrap resampling) or ``ar`` (approximate
            randomization).
        samples: resamples or trials; ``None`` for sacrebleu's 1000 (bootstrap) or 10000 (ar).
        seed: the random seed (sacrebleu's default 12345); ``None`` draws unseeded.
        **options: the metric's options, with a metric name only.

    With the same seed, BLEU and chrF give the p-values of sacrebleu's
    ``PairedTest(..., test_type="bs" | "ar")`` on the same systems, A being its baseline.

    Example:
        >>> golds = ["Paris", "Rome", "Oslo", "Bern", "Kyiv", "Lima"]
        >>> result = paired_test("exact_match", golds, ["Paris", "Rome", "Oslo", "x", "y", "z"],
        ...                      golds, samples=200)
        >>> result.score_a, result.score_b, result.p_value
        (1.0, 0.5, 0.009950248756218905)

    Raises:
        InvalidOption: unknown metric, method or metric option, options given with a built
            metric, ``samples`` not a positive int, ``seed`` not a non-negative int or None.
        InvalidInput: the three sequences differ in length or are empty, or a row is not
            what the metric takes (the message names the row).
    """
    scorer = _resolve_metric(metric, options)
    method, samples, seed = _check_settings(method, samples, seed)
    rows_a = _as_list(predictions_a, "predictions_a")
    rows_b = _as_list(predictions_b, "predictions_b")
    golds = _as_list(targets, "targets")
    if not len(rows_a) == len(rows_b) == len(golds):
        raise InvalidInput(
            f"paired_test: {len(rows_a)} predictions_a, {len(rows_b)} predictions_b and "
            f"{len(golds)} targets; give one of each per row"
        )
    if not rows_a:
        raise InvalidInput("paired_test: no rows to test")
    if isinstance(scorer, CorpusMetric):
        stats_a = _statistics(scorer, rows_a, golds, "predictions_a")
        stats_b = _statistics(scorer, rows_b, golds, "predictions_b")
        score = scorer.score_from_statistics
        if method == "bootstrap":
            return _bootstrap_statistics(scorer.signature, stats_a, stats_b, score, samples, seed)
        return _ar_statistics(scorer.signature, stats_a, stats_b, score, samples, seed)
    values_a = _sentence_scores(scorer, rows_a, golds, "predictions_a")
    values_b = _sentence_scores(scorer, rows_b, golds, "predictions_b")
    return _test_means(scorer.signature, values_a, values_b, method, samples, seed)


def paired_test_values(
    values_a: Sequence[float],
    values_b: Sequence[float],
    *,
    method: str = "bootstrap",
    samples: int | None = None,
    seed: int | None = DEFAULT_SEED,
) -> PairedResult:
    """Paired test on per-row numbers (rewards, sentence scores); the statistic is the mean.

    Row ``i`` of A and row ``i`` of B belong together. The draws, the p-value and the interval
    are those of :func:`paired_test` (sacrebleu's), with the mean as the corpus score; a
    resampled difference exceeds the observed one only beyond the rounding error of the sums.

    Example:
        >>> result = paired_test_values([1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 0, 0], samples=200)
        >>> result.difference, result.p_value
        (-0.5, 0.024875621890547265)

    Raises:
        InvalidOption: unknown ``method``, bad ``samples`` or ``seed`` (as :func:`paired_test`).
        InvalidInput: the sequences differ in length or are empty, or a value is not a finite
            number (the message names the side and the index).
    """
    method, samples, seed = _check_settings(method, samples, seed)
    first = _finite_values(values_a, "values_a")
    second = _finite_values(values_b, "values_b")
    if len(first) != len(second):
        raise InvalidInput(
            f"paired_test_values: {len(first)} values_a but {len(second)} values_b; give one "
            "pair per row"
        )
    if not len(first):
        raise InvalidInput("paired_test_values: no rows to test")
    return _test_means("mean", first, second, method, samples, seed)


# --------------------------------------------------------------------------- checking inputs


def _resolve_metric(metric: str | Metric, options: dict[str, object]) -> Metric:
    if isinstance(metric, str):
        return get_metric(metric, **options)
    if isinstance(metric, Metric):
        if options:
            raise InvalidOption(
                f"paired_test: options ({', '.join(sorted(options))}) go with a metric name; "
                f"{metric!r} is already built"
            )
        return metric
    raise InvalidOption(
        f"paired_test: metric must be a metric name or a built metric, got {type(metric).__name__}"
    )


def _check_settings(method: object, samples: object, seed: object) -> tuple[str, int, int | None]:
    if not isinstance(method, str) or method not in METHODS:
        raise InvalidOption(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if samples is None:
        samples = DEFAULT_SAMPLES[method]
    if type(samples) is not int or samples < 1:
        raise InvalidOption(f"samples must be a positive int, got {samples!r}")
    if seed is not None and (type(seed) is not int or seed < 0):
        raise InvalidOption(f"seed must be a non-negative int or None, got {seed!r}")
    return method, samples, seed


def _as_list(values: object, field: str) -> list[Any]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
        raise InvalidInput(f"paired_test: {field} must be a list, got {type(values).__name__}")
    return list(values)


def _statistics(
    metric: CorpusMetric, predictions: list[str], targets: list[Targets], field: str
) -> np.ndarray:
    vectors = []
    for row, (prediction, golds) in enumerate(zip(predictions, targets, strict=True)):
        try:
            vectors.append(np.asarray(metric.sentence_statistics(prediction, golds)))
        except InvalidInput as error:
            raise InvalidInput(f"paired_test: {field}, row {row}: {error}") from None
    return np.stack(vectors)


def _sentence_scores(
    metric: Metric, predictions: list[str], targets: list[Targets], field: str
) -> np.ndarray:
    values = np.empty(len(predictions))
    for row, (prediction, golds) in enumerate(zip(predictions, targets, strict=True)):
        try:
            values[row] = metric(prediction, golds)
        except InvalidInput as error:
            raise InvalidInput(f"paired_test: {field}, row {row}: {error}") from None
    return values


def _finite_values(values: object, field: str) -> np.ndarray:
    """``values`` as a 1-D float64 array of finite numbers."""
    numeric = (isinstance(values, np.ndarray) and values.dtype.kind in "biuf") or (
        isinstance(values, array.array) and values.typecode in "bBhHiIlLqQfd"
    )
    if not numeric:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray):
            raise InvalidInput(
                f"paired_test_values: {field} must be a list of numbers, got "
                f"{type(values).__name__}"
            )
        for index, value in enumerate(values):
            if not isinstance(value, numbers.Real):
                raise InvalidInput(
                    f"paired_test_values: {field}[{index}] must be a finite number, got "
                    f"{type(value).__name__}"
                )
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 1:
        raise InvalidInput(
            f"paired_test_values: {field} must be a flat list of numbers, got shape {data.shape}"
        )
    not_finite = np.flatnonzero(~np.isfinite(data))
    if not_finite.size:
        index = int(not_finite[0])
        raise InvalidInput(
            f"paired_test_values: {field}[{index}] must be a finite number, got "
            f"{float(data[index])!r}"
        )
    return data


# ---------------------------------------------------------------------------------- draws


def _generator(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def _bootstrap_blocks(
    rng: np.random.Generator, rows: int, samples: int, width: int = 1
) -> Iterator[np.ndarray]:
    """Row indices of the resamples, in blocks (of about ``_CHUNK_CELLS`` values once each
    index is expanded into ``width`` statistics): the draws of one
    ``rng.choice(rows, size=(samples, rows), replace=True)``."""
    block = max(1, _CHUNK_CELLS // (rows * width))
    for start in range(0, samples, block):
        yield rng.choice(rows, size=(min(block, samples - start), rows), replace=True)


def _ar_blocks(rng: np.random.Generator, rows: int, samples: int) -> Iterator[np.ndarray]:
    """Which rows keep their system in each trial, in blocks: the draws of one
    ``rng.integers(2, size=(samples, rows), dtype=bool)``."""
    block = max(32, _CHUNK_CELLS // rows // 32 * 32)
    for start in range(0, samples, block):
        yield rng.integers(2, size=(min(block, samples - start), rows), dtype=bool)


def _p_value(statistics: np.ndarray, observed: float, tolerance: float | None = None) -> float:
    """``(number of statistics above observed + 1) / (number of statistics + 1)``: strictly
    above without ``tolerance`` (sacrebleu), else at least as large up to ``tolerance``."""
    if tolerance is None:
        above = int(np.count_nonzero(statistics > observed))
    else:
        above = int(np.count_nonzero(statistics >= observed - tolerance))
    return (above + 1) / (len(statistics) + 1)


def _interval(scores: np.ndarray) -> tuple[float, float]:
    """sacrebleu's ``estimate_ci``: the mean and the half-width of the 95% interval."""
    ordered = np.sort(scores)
    low = len(ordered) // 40
    return float(ordered.mean()), float(0.5 * (ordered[len(ordered) - low - 1] - ordered[low]))


# ------------------------------------------------------------------------ corpus statistics


def _bootstrap_statistics(
    name: str,
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    score: Callable[[np.ndarray], float],
    samples: int,
    seed: int | None,
) -> PairedResult:
    score_a = score(stats_a.sum(axis=0))
    score_b = score(stats_b.sum(axis=0))
    # sacrebleu resamples float32 statistics.
    single_a = stats_a.astype(np.float32)
    single_b = stats_b.astype(np.float32)
    scores_a = np.empty(samples)
    scores_b = np.empty(samples)
    done = 0
    for indices in _bootstrap_blocks(_generator(seed), len(stats_a), samples, stats_a.shape[1]):
        for sums_a, sums_b in zip(
            single_a[indices].sum(axis=1), single_b[indices].sum(axis=1), strict=True
        ):
            scores_a[done] = score(sums_a)
            scores_b[done] = score(sums_b)
            done += 1
    return _bootstrap_result(name, score_a, score_b, scores_a, scores_b, seed)


def _ar_statistics(
    name: str,
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    score: Callable[[np.ndarray], float],
    samples: int,
    seed: int | None,
) -> PairedResult:
    score_a = score(stats_a.sum(axis=0))
    score_b = score(stats_b.sum(axis=0))
    # sacrebleu sums integer statistics; float64 products are the same whole numbers (below
    # 2**53) from BLAS, turned back into the statistics' type.
    both = np.concatenate([stats_a, stats_b], axis=1).astype(np.float64)
    width = stats_a.shape[1]
    differences = np.empty(samples)
    done = 0
    for keep in _ar_blocks(_generator(seed), len(stats_a), samples):
        kept = (keep.astype(np.float64) @ both).astype(stats_a.dtype)
        swapped = ((~keep).astype(np.float64) @ both).astype(stats_a.dtype)
        shuffled_a = kept[:, :width] + swapped[:, width:]
        shuffled_b = swapped[:, :width] + kept[:, width:]
        for sums_a, sums_b in zip(shuffled_a, shuffled_b, strict=True):
            differences[done] = abs(score(sums_a) - score(sums_b))
            done += 1
    p_value = _p_value(differences, abs(score_a - score_b))
    return PairedResult(name, "ar", score_a, score_b, score_b - score_a, p_value, samples, seed)


def _bootstrap_result(
    name: str,
    score_a: float,
    score_b: float,
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    seed: int | None,
    tolerance: float | None = None,
) -> PairedResult:
    sample_differences = np.abs(scores_b - scores_a)
    centered = sample_differences - sample_differences.mean()
    p_value = _p_value(centered, abs(score_a - score_b), tolerance)
    mean_a, ci_a = _interval(scores_a)
    mean_b, ci_b = _interval(scores_b)
    return PairedResult(
        name,
        "bootstrap",
        score_a,
        score_b,
        score_b - score_a,
        p_value,
        len(scores_a),
        seed,
        mean_a,
        ci_a,
        mean_b,
        ci_b,
    )


# ------------------------------------------------------------------------------------ means


def _test_means(
    name: str,
    values_a: np.ndarray,
    values_b: np.ndarray,
    method: str,
    samples: int,
    seed: int | None,
) -> PairedResult:
    """The paired test of two per-row value arrays with the mean as the corpus score."""
    rows = len(values_a)
    score_a = float(values_a.mean())
    score_b = float(values_b.mean())
    # A sum of `rows` values is off by at most rows * eps * rows * largest; a mean by
    # rows * eps * largest; comparing two differences of means, four times that (doubled again
    # for margin). Differences closer than this to the observed one are ties.
    largest = max(float(np.abs(values_a).max()), float(np.abs(values_b).max()))
    tolerance = 8.0 * rows * float(np.finfo(np.float64).eps) * largest
    rng = _generator(seed)
    if method == "bootstrap":
        means_a = np.empty(samples)
        means_b = np.empty(samples)
        done = 0
        for indices in _bootstrap_blocks(rng, rows, samples):
            stop = done + len(indices)
            means_a[done:stop] = values_a[indices].sum(axis=1) / rows
            means_b[done:stop] = values_b[indices].sum(axis=1) / rows
            done = stop
        return _bootstrap_result(name, score_a, score_b, means_a, means_b, seed, tolerance)
    both = np.stack([values_a, values_b], axis=1)
    differences = np.empty(samples)
    done = 0
    for keep in _ar_blocks(rng, rows, samples):
        kept = keep.astype(np.float64) @ both
        swapped = (~keep).astype(np.float64) @ both
        stop = done + len(keep)
        differences[done:stop] = np.abs(
            (kept[:, 0] + swapped[:, 1]) / rows - (swapped[:, 0] + kept[:, 1]) / rows
        )
        done = stop
    p_value = _p_value(differences, abs(score_a - score_b), tolerance)
    return PairedResult(name, "ar", score_a, score_b, score_b - score_a, p_value, samples, seed)
