"""Corpus aggregation: a mean with a percentile-bootstrap confidence interval."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from reward_plugins.errors import InvalidInput, InvalidOption

_COUNT_RESAMPLING_MIN_SIZE = 10_000
"""From this many values, inputs with few distinct values are resampled through their counts."""


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
    rng = np.random.default_rng(seed)
    if data.size >= _COUNT_RESAMPLING_MIN_SIZE:
        distinct, counts = np.unique(data, return_counts=True)
        if distinct.size * 64 <= data.size:
            # A resample only changes how often each distinct value is drawn, and those counts
            # are multinomial: drawing them directly gives the same bootstrap distribution at a
            # cost independent of n (0/1 metrics over a million rows take milliseconds).
            draws = rng.multinomial(data.size, counts / data.size, size=resamples)
            return _interval(mean, draws @ distinct / data.size, confidence, data)
    # Resample in chunks so memory stays bounded for million-row inputs.
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // data.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        indices = rng.integers(0, data.size, size=(stop - start, data.size))
        means[start:stop] = data[indices].mean(axis=1)
    return _interval(mean, means, confidence, data)


def _interval(mean: float, means: np.ndarray, confidence: float, data: np.ndarray) -> MeanCI:
    tail = (1.0 - confidence) / 2.0
    # A resampled mean lies within [min, max]; clipping removes float round-off beyond it.
    low, high = np.clip(np.quantile(means, [tail, 1.0 - tail]), data.min(), data.max())
    return MeanCI(mean, float(low), float(high), int(data.size))
