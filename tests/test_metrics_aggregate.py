"""Corpus aggregation: bootstrap mean and confidence interval."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reward_plugins.metrics import MeanCI, bootstrap_mean


def test_mean_is_exact_and_interval_brackets_it() -> None:
    values = [0.0, 1.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75]
    result = bootstrap_mean(values)
    assert result.mean == sum(values) / len(values)
    assert result.n == len(values)
    assert min(values) <= result.low <= result.mean <= result.high <= max(values)


def test_reproducible_through_seed() -> None:
    values = np.random.default_rng(1).random(200)
    assert bootstrap_mean(values, seed=3) == bootstrap_mean(values, seed=3)
    assert bootstrap_mean(values, seed=3) != bootstrap_mean(values, seed=4)


def test_interval_matches_the_normal_approximation() -> None:
    # 4000 fair coin flips: the 95% interval of the mean is about mean +- 1.96 * sqrt(pq / n)
    # (central limit theorem); the percentile bootstrap must agree to a few percent of its width.
    flips = np.random.default_rng(0).integers(0, 2, size=4000).astype(float)
    result = bootstrap_mean(flips, resamples=2000)
    half_width = 1.959964 * math.sqrt(result.mean * (1 - result.mean) / flips.size)
    assert result.low == pytest.approx(result.mean - half_width, abs=0.1 * half_width)
    assert result.high == pytest.approx(result.mean + half_width, abs=0.1 * half_width)


def test_wider_confidence_gives_a_wider_interval() -> None:
    values = np.random.default_rng(2).random(300)
    narrow = bootstrap_mean(values, confidence=0.5)
    wide = bootstrap_mean(values, confidence=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_large_inputs_resample_in_chunks() -> None:
    values = np.random.default_rng(5).random(50_000)
    result = bootstrap_mean(values, resamples=100)
    assert result.low < result.mean < result.high
    assert result.high - result.low < 0.01


def test_edge_cases() -> None:
    empty = bootstrap_mean([])
    assert empty.n == 0 and all(math.isnan(x) for x in (empty.mean, empty.low, empty.high))
    assert bootstrap_mean([0.5]) == MeanCI(0.5, 0.5, 0.5, 1)
    assert bootstrap_mean(x for x in (1.0, 1.0)) == MeanCI(1.0, 1.0, 1.0, 2)


@pytest.mark.parametrize(
    ("values", "options", "message"),
    [
        ([1.0], {"confidence": 1.0}, r"confidence must be in \(0, 1\), got 1.0"),
        ([1.0], {"confidence": 0}, "confidence must be in"),
        ([1.0], {"resamples": 0}, "resamples must be positive, got 0"),
        ([1.0, float("nan")], {}, r"values\[1\] is nan; every value must be finite"),
        ([float("inf")], {}, r"values\[0\] is inf"),
        ([[1.0, 2.0]], {}, r"flat sequence of numbers, got shape \(1, 2\)"),
    ],
)
def test_invalid_input(values: list[object], options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_mean(values, **options)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=50))
def test_bounds_stay_within_the_data(values: list[float]) -> None:
    result = bootstrap_mean(values, resamples=200)
    assert min(values) <= result.low <= result.high <= max(values)
    assert result.mean == pytest.approx(float(np.mean(values)))
