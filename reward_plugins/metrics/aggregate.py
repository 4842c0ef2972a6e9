"""Corpus aggregation: a mean with a percentile-bootstrap confidence interval."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from reward_plugins.errors import InvalidInput, InvalidOption

_COUNT_RESAMPLING_MIN_SIZE = 10_000
"""From this many values, inputs with few distinct values are resampled through their counts."""

_MULTINOMIAL_COST = 32
"""Counts are resampled as a multinomial only with this many rows per distinct value or more."""


class MeanCI(NamedTuple):
    """A mean and the bounds of its bootstrap confidence interval."""

    mean: float
    low: float
    high: float
    n: int


def bootstrap_mean(
    values: Iterable[float],
    *,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> MeanCI:
    """Mean of ``values`` with a percentile-bootstrap interval, reproducible through ``seed``.

    An empty input gives NaN bounds and ``n=0``; a single value gives a zero-width interval.

    Example:
        >>> bootstrap_mean([1.0, 1.0, 1.0])
        MeanCI(mean=1.0, low=1.0, high=1.0, n=3)

    Raises:
        InvalidOption: ``confidence`` is not in (0, 1), or ``resamples`` is not positive.
        InvalidInput: a value is not a finite number (NaN would silently poison the mean).
    """
    if not 0.0 < confidence < 1.0:
        raise InvalidOption(f"confidence must be in (0, 1), got {confidence!r}")
    if resamples < 1:
        raise InvalidOption(f"resamples must be positive, got {resamples!r}")
    data = np.asarray(list(values), dtype=float)
    if data.ndim != 1:
        raise InvalidInput(f"values must be a flat sequence of numbers, got shape {data.shape}")
    not_finite = np.flatnonzero(~np.isfinite(data))
    if not_finite.size:
        index = int(not_finite[0])
        raise InvalidInput(f"values[{index}] is {float(data[index])!r}; every value must be finite")
    if data.size == 0:
        return MeanCI(float("nan"), float("nan"), float("nan"), 0)
    mean = float(data.mean())
    if data.size == 1:
        return MeanCI(mean, mean, mean, 1)
    distinct, counts = np.unique(data, return_counts=True)
    if data.size < _COUNT_RESAMPLING_MIN_SIZE or distinct.size * _MULTINOMIAL_COST > data.size:
        # Resample indices, in chunks so memory stays bounded for million-row inputs.
        rng = np.random.default_rng(seed)
        means = np.empty(resamples)
        chunk = max(1, 2_000_000 // data.size)
        for start in range(0, resamples, chunk):
            stop = min(resamples, start + chunk)
            indices = rng.integers(0, data.size, size=(stop - start, data.size))
            means[start:stop] = data[indices].mean(axis=1)
        return _interval(mean, means, confidence, distinct, int(data.size))
    return _counts_interval(distinct, counts, confidence, resamples, seed)


def bootstrap_mean_of_counts(
    values: np.ndarray,
    counts: np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> MeanCI:
    """:func:`bootstrap_mean` of data given as distinct finite ``values`` and their ``counts``
    (positive integers), so that streamed data need not be kept row by row.

    A resample only changes how often each distinct value is drawn, and those counts are
    multinomial: drawing them directly gives the same bootstrap distribution as resampling the
    rows, at a cost that grows with the distinct values, not the rows. Below 10,000 values, or
    with many distinct values, the result is exactly ``bootstrap_mean`` of the sorted values.

    Example:
        >>> bootstrap_mean_of_counts(np.array([0.0, 1.0]), np.array([0, 4]))
        MeanCI(mean=1.0, low=1.0, high=1.0, n=4)
    """
    if not 0.0 < confidence < 1.0:
        raise InvalidOption(f"confidence must be in (0, 1), got {confidence!r}")
    if resamples < 1:
        raise InvalidOption(f"resamples must be positive, got {resamples!r}")
    present = counts > 0
    values, counts = np.asarray(values, dtype=float)[present], np.asarray(counts)[present]
    if values.size == 0:
        return MeanCI(float("nan"), float("nan"), float("nan"), 0)
    total = int(counts.sum())
    if total < _COUNT_RESAMPLING_MIN_SIZE or values.size * _MULTINOMIAL_COST > total:
        # Few rows, or many distinct values (a multinomial draw costs about this many index
        # draws per distinct value): resampling the rows themselves is as fast or faster.
        order = np.argsort(values, kind="stable")
        repeated = np.repeat(values[order], counts[order])
        return bootstrap_mean(repeated, confidence=confidence, resamples=resamples, seed=seed)
    return _counts_interval(values, counts, confidence, resamples, seed)


def _counts_interval(
    values: np.ndarray, counts: np.ndarray, confidence: float, resamples: int, seed: int
) -> MeanCI:
    total = int(counts.sum())
    mean = float(np.dot(values, counts) / total)
    if values.size == 1 or total == 1:
        return MeanCI(mean, mean, mean, total)
    rng = np.random.default_rng(seed)
    if values.size == 2:  # the common 0/1 metric: one binomial draw per resample
        draws = rng.binomial(total, counts[1] / total, size=resamples)
        means = (values[0] * (total - draws) + values[1] * draws) / total
    else:
        draws = rng.multinomial(total, counts / total, size=resamples)
        means = draws @ values / total
    return _interval(mean, means, confidence, values, total)


def _interval(
    mean: float, means: np.ndarray, confidence: float, distinct: np.ndarray, n: int
) -> MeanCI:
    tail = (1.0 - confidence) / 2.0
    # A resampled mean lies within [min, max]; clipping removes float round-off beyond it.
    low, high = np.clip(np.quantile(means, [tail, 1.0 - tail]), distinct.min(), distinct.max())
    return MeanCI(mean, float(low), float(high), n)
