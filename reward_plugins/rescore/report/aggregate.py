"""The report's accumulators, whose size does not grow with the number of rows: per-column
moments (the per-step bands), per-column value counts (the bootstrap intervals), the top rows
by a key (the example rows), and the logged vs re-scored agreement."""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple

import numpy as np

from reward_plugins.metrics.aggregate import MeanCI, bootstrap_mean_of_counts
from reward_plugins.rescore.report.rows import RowStats
from reward_plugins.rescore.report.series import AGREEMENT_REL_TOL

MAX_PAIRS = 36
"""Distinct (logged, re-scored) pairs :class:`Agreement` counts exactly; past them, by sign."""


class Moments:
    """Per column: count, sum, sum of squares, minimum and maximum of the values seen."""

    def __init__(self) -> None:
        self.rows = 0
        self.n = np.zeros(0)
        self.total = np.zeros(0)
        self.squares = np.zeros(0)
        self.low = np.zeros(0)
        self.high = np.zeros(0)

    def _widen(self, width: int) -> None:
        more = width - self.n.size
        if more > 0:
            self.n, self.total, self.squares = (
                np.concatenate([array, np.zeros(more)])
                for array in (self.n, self.total, self.squares)
            )
            self.low = np.concatenate([self.low, np.full(more, np.inf)])
            self.high = np.concatenate([self.high, np.full(more, -np.inf)])

    def add_block(self, values: np.ndarray) -> None:
        """Add rows of values, one column per series (NaN where a row has no value)."""
        self._widen(values.shape[1])
        with np.errstate(over="ignore", invalid="ignore"):  # huge values: an infinite spread
            self._add_block(values)

    def _add_block(self, values: np.ndarray) -> None:
        present = ~np.isnan(values)
        filled = np.where(present, values, 0.0)
        columns = slice(0, values.shape[1])
        self.rows += values.shape[0]
        self.n[columns] += present.sum(axis=0)
        self.total[columns] += filled.sum(axis=0)
        self.squares[columns] += (filled * filled).sum(axis=0)
        self.low[columns] = np.fmin(self.low[columns], np.where(present, values, np.inf).min(0))
        self.high[columns] = np.fmax(self.high[columns], np.where(present, values, -np.inf).max(0))

    def add_value(self, index: int, value: float) -> None:
        self._widen(index + 1)
        self.n[index] += 1
        self.total[index] += value
        self.squares[index] += value * value
        self.low[index] = min(self.low[index], value)
        self.high[index] = max(self.high[index], value)

    def has(self, index: int) -> bool:
        """Whether column ``index`` holds a value."""
        return index < self.n.size and bool(self.n[index])

    def band(self, index: int) -> MeanCI:
        """Mean ± 1.96·s/√n, clipped to the values' range (NaN without values)."""
        n = int(self.n[index]) if index < self.n.size else 0
        if n == 0:
            return MeanCI(math.nan, math.nan, math.nan, 0)
        mean = float(self.total[index]) / n
        spread = 0.0
        if n > 1:
            variance = max(0.0, (float(self.squares[index]) - n * mean * mean) / (n - 1))
            spread = 1.96 * math.sqrt(variance / n)
        low = max(mean - spread, float(self.low[index]))
        high = min(mean + spread, float(self.high[index]))
        return MeanCI(mean, min(low, mean), max(high, mean), n)


class Counts:
    """Per column: how often each distinct value occurred (for bootstrap intervals)."""

    def __init__(self) -> None:
        self.rows = 0
        self.values: list[dict[float, int]] = []

    def _column(self, index: int) -> dict[float, int]:
        while len(self.values) <= index:
            self.values.append({})
        return self.values[index]

    def add_block(self, values: np.ndarray) -> None:
        self.rows += values.shape[0]
        for index in range(values.shape[1]):
            column = values[:, index]
            column = column[~np.isnan(column)]
            if column.size:
                seen = self._column(index)
                distinct, counts = np.unique(column, return_counts=True)
                for value, count in zip(distinct.tolist(), counts.tolist(), strict=True):
                    seen[value] = seen.get(value, 0) + count

    def add_value(self, index: int, value: float) -> None:
        seen = self._column(index)
        seen[value] = seen.get(value, 0) + 1

    def merge(self, other: Counts) -> None:
        self.rows += other.rows
        for index, more in enumerate(other.values):
            seen = self._column(index)
            for value, count in more.items():
                seen[value] = seen.get(value, 0) + count

    def distribution(self, index: int) -> dict[float, int]:
        return self.values[index] if index < len(self.values) else {}

    def interval(self, index: int) -> MeanCI:
        seen = self.distribution(index)
        if not seen:
            return MeanCI(math.nan, math.nan, math.nan, 0)
        return bootstrap_mean_of_counts(
            np.fromiter(seen.keys(), float, len(seen)), np.fromiter(seen.values(), np.int64)
        )


class TopK:
    """The ``k`` rows with the largest keys (the earliest row first among equal keys)."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._heap: list[tuple[float, int, RowStats]] = []
        self._seen = 0

    def offer(self, key: float, stats: RowStats) -> None:
        self._seen += 1
        item = (key, -self._seen, stats)
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, item)
        elif self.k and item[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, item)

    def best(self) -> list[tuple[float, RowStats]]:
        """``(key, row)`` pairs, the largest key first."""
        return [(key, stats) for key, _, stats in sorted(self._heap, reverse=True)]


class Group:
    """A GRPO group of the current step: its size, the shared reward (``None`` once two rows
    differ or a row has none) and its first row."""

    __slots__ = ("first", "score", "size")

    def __init__(self, stats: RowStats) -> None:
        self.size = 1
        self.score = stats.score
        self.first = stats


class Agreement:
    """The rows' logged ``score`` against the re-scored one: how many agree (within
    :data:`AGREEMENT_REL_TOL`), the ``examples`` rows that differ most, and the count of each
    (logged, re-scored) pair -- exactly while there are at most :data:`MAX_PAIRS` distinct pairs
    (``pairs`` is ``None`` after), and by the sign of each side (``buckets``: -1, 0, 1)."""

    def __init__(self, examples: int) -> None:
        self.logged = 0
        self.agreeing = 0
        self.disagreeing = TopK(examples)
        self.pairs: dict[tuple[float, float], int] | None = {}
        self.buckets: dict[tuple[int, int], int] = {}

    def add(self, logged: float, score: float, stats: RowStats) -> float:
        """Count one row; 1.0 when its two scores agree, else 0.0."""
        self.logged += 1
        agree = math.isclose(logged, score, rel_tol=AGREEMENT_REL_TOL, abs_tol=1e-9)
        if agree:
            self.agreeing += 1
        else:
            self.disagreeing.offer(abs(logged - score), stats)
        if self.pairs is not None:
            pair = (logged, score)
            self.pairs[pair] = self.pairs.get(pair, 0) + 1
            if len(self.pairs) > MAX_PAIRS:
                self.pairs = None
        bucket = (_sign(logged), _sign(score))
        self.buckets[bucket] = self.buckets.get(bucket, 0) + 1
        return 1.0 if agree else 0.0


class RateExamples(NamedTuple):
    """The example rows a rate indicator shows: the rows holding ``value`` (the rarer of 0
    and 1 over the run, 1 on a tie), the highest reward first; ``share`` is the share of the
    rows with the key that hold it."""

    value: float
    share: float
    rows: list[RowStats]


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)
