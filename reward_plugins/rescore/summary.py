"""The job summary, accumulated as counts so that it costs the same for any number of rows.

Workers count, per chunk, how many rows share each data source, step and vector of summary
metric values; the parent merges the counts. Intervals are computed once at the end: a 95% bootstrap
interval per data source and overall (resampling the counts, the same distribution as
resampling the rows), and a normal-approximation band per step (mean +- 1.96 standard errors,
clipped to the values' range), which is what a curve over hundreds of steps needs and costs
nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from reward_plugins.metrics.aggregate import bootstrap_mean_of_counts

SUMMARY_METRICS: tuple[tuple[str, str], ...] = (
    ("score", "score"),
    ("em", "EM"),
    ("subem", "SubEM"),
    ("f1", "F1"),
    ("answer_found", "answer rate"),
    ("spam_penalized", "spam-penalized rate"),
)
"""``(result key, label)`` of the summary's means, each reported where the scorer computes it
for every row of the group."""

Counts = Counter[tuple[str, int | None, tuple[Any, ...]]]
"""How many rows had each ``(data_source, step, values)``, where ``values`` holds the row's value
of each summary metric (``None`` where the result has no such key): for QA metrics a chunk has
few distinct such tuples, so counting them is cheap to do, send and merge."""

KEYS = tuple(key for key, _ in SUMMARY_METRICS)
"""The summary metrics' result keys, in the order of a :data:`Counts` values tuple."""


def count(rows: Iterable[tuple[str, int | None, Mapping[str, Any]]]) -> Counts:
    """The counts of ``(data_source, step, result)`` rows (run in the worker)."""
    return Counter((source, step, tuple(map(result.get, KEYS))) for source, step, result in rows)


def merge(total: Counts, part: Counts) -> None:
    """Add the counts ``part`` into ``total``."""
    total.update(part)


Group = dict[str, Any]
"""``{"rows": n, "values": {metric: {value: count}}}``: one data source, step, or all rows."""


def _groups(counts: Counts) -> tuple[dict[str, Group], dict[int, Group], Group]:
    """The counts per data source, per step (rows with a step), and overall."""
    sources: dict[str, Group] = {}
    steps: dict[int, Group] = {}
    overall: Group = {"rows": 0, "values": {}}
    for (source, step, values), n in counts.items():
        targets = [sources.setdefault(source, {"rows": 0, "values": {}}), overall]
        if step is not None:
            targets.append(steps.setdefault(step, {"rows": 0, "values": {}}))
        for group in targets:
            group["rows"] += n
            for key, value in zip(KEYS, values, strict=True):
                if value is not None:
                    seen = group["values"].setdefault(key, {})
                    seen[value] = seen.get(value, 0) + n
    return sources, steps, overall


def _arrays(values: Mapping[Any, int]) -> tuple[np.ndarray, np.ndarray]:
    return np.fromiter(values.keys(), float, len(values)), np.fromiter(values.values(), np.int64)


def _bootstrap(group: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    metrics = {}
    for metric, values in _complete(group):
        interval = bootstrap_mean_of_counts(*_arrays(values))
        metrics[metric] = {"mean": interval.mean, "low": interval.low, "high": interval.high}
    return metrics


def _band(group: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    metrics = {}
    for metric, values in _complete(group):
        points, weights = _arrays(values)
        n = int(weights.sum())
        mean = float(np.dot(points, weights) / n)
        spread = 0.0
        if n > 1:
            variance = float(np.dot((points - mean) ** 2, weights)) / (n - 1)
            spread = 1.96 * math.sqrt(variance / n)
        low, high = max(mean - spread, points.min()), min(mean + spread, points.max())
        metrics[metric] = {"mean": mean, "low": float(low), "high": float(high)}
    return metrics


def _complete(group: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[Any, int]]]:
    """The metrics every row of the group has a value for, in summary order."""
    for metric, _ in SUMMARY_METRICS:
        values = group["values"].get(metric)
        if values and sum(values.values()) == group["rows"]:
            yield metric, values


def finish(counts: Counts) -> dict[str, Any]:
    """The summary of ``counts``.

    ``{"sources": {data_source: group}, "overall": group, "steps": [{"step": n, **group}]}``,
    sources sorted, steps in step order (empty when no row has a ``step``), where a group is
    ``{"rows": n, "metrics": {key: {"mean", "low", "high"}}}``.
    """
    sources, steps, overall = _groups(counts)
    return {
        "sources": {
            name: {"rows": sources[name]["rows"], "metrics": _bootstrap(sources[name])}
            for name in sorted(sources)
        },
        "overall": {"rows": overall["rows"], "metrics": _bootstrap(overall)},
        "steps": [
            {"step": step, "rows": steps[step]["rows"], "metrics": _band(steps[step])}
            for step in sorted(steps)
        ],
    }
