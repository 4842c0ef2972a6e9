"""The job summary, accumulated as counts so that it costs the same for any number of rows.

Workers count, per chunk, how often each value of each summary metric occurs per data source and
per step; the parent merges the counts. Intervals are computed once at the end: a 95% bootstrap
interval per data source and overall (resampling the counts, the same distribution as
resampling the rows), and a normal-approximation band per step (mean +- 1.96 standard errors,
clipped to the values' range), which is what a curve over hundreds of steps needs and costs
nothing.
"""

from __future__ import annotations

import math
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

GroupKey = tuple[str, Any]
"""``("source", data_source)`` or ``("step", step)`` (``step`` is ``None`` without a column)."""

Counts = dict[GroupKey, dict[str, Any]]
"""Per group: ``{"rows": n, "values": {metric: {value: count}}}``."""


def count(rows: Iterable[tuple[str, int | None, Mapping[str, Any]]]) -> Counts:
    """The counts of ``(data_source, step, result)`` rows (run in the worker)."""
    counts: Counts = {}
    for source, step, result in rows:
        for key in (("source", source), ("step", step)):
            group = counts.get(key)
            if group is None:
                group = counts[key] = {"rows": 0, "values": {}}
            group["rows"] += 1
            values = group["values"]
            for metric, _ in SUMMARY_METRICS:
                value = result.get(metric)
                if value is not None:
                    seen = values.setdefault(metric, {})
                    seen[value] = seen.get(value, 0) + 1
    return counts


def merge(total: Counts, part: Counts) -> None:
    """Add the counts ``part`` into ``total``."""
    for key, group in part.items():
        _add(total.setdefault(key, {"rows": 0, "values": {}}), group)


def _add(into: dict[str, Any], group: Mapping[str, Any]) -> None:
    into["rows"] += group["rows"]
    for metric, values in group["values"].items():
        seen = into["values"].setdefault(metric, {})
        for value, n in values.items():
            seen[value] = seen.get(value, 0) + n


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
    overall: dict[str, Any] = {"rows": 0, "values": {}}
    sources = {}
    for key in sorted((k for k in counts if k[0] == "source"), key=lambda k: k[1]):
        _add(overall, counts[key])
        sources[key[1]] = {"rows": counts[key]["rows"], "metrics": _bootstrap(counts[key])}
    steps = sorted(k[1] for k in counts if k[0] == "step" and k[1] is not None)
    return {
        "sources": sources,
        "overall": {"rows": overall["rows"], "metrics": _bootstrap(overall)},
        "steps": [
            {
                "step": step,
                "rows": counts["step", step]["rows"],
                "metrics": _band(counts["step", step]),
            }
            for step in steps
        ],
    }
