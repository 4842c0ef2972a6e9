"""The job summary, accumulated as counts so that it costs the same for any number of rows.

The summary knows no scorer: it counts every key of every result, and the scorer's result schema
(:mod:`reward_plugins.results`), given at the end, names and orders them. Workers count, per
chunk, how many rows share each data source, step and whole result (:data:`Tally`, one cheap
update per row), then fold that into counts per key and value (:func:`by_key`), which is what
they send: their size grows with the distinct values of each key, never with the rows. The
parent merges the counts. Intervals are computed once at the end: a 95% bootstrap interval per
data source and overall (resampling the counts, the same distribution as resampling the rows),
and a normal-approximation band per step (mean +- 1.96 standard errors, clipped to the values'
range), which is what a curve over hundreds of steps needs and costs nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from reward_plugins.metrics.aggregate import bootstrap_mean_of_counts
from reward_plugins.results import SCORE_ONLY, Schema, complete, union
from reward_plugins.router import result_schema

Tally = Counter[tuple[str, int | None, tuple[tuple[str, Any], ...]]]
"""A worker's count of rows per ``(data_source, step, tuple(result.items()))``."""

Counts = Counter[tuple[str, int | None, str | None, Any]]
"""How many rows had each ``(data_source, step, key, value)``; ``(data_source, step, None,
None)`` counts the rows themselves."""


def by_key(tally: Tally) -> Counts:
    """The counts per key and value of a worker's :data:`Tally` (what the worker sends)."""
    counts: Counts = Counter()
    for (source, step, items), n in tally.items():
        counts[source, step, None, None] += n
        for key, value in items:
            counts[source, step, key, value] += n
    return counts


def count(rows: Iterable[tuple[str, int | None, Mapping[str, Any]]]) -> Counts:
    """The counts of ``(data_source, step, result)`` rows."""
    tally: Tally = Counter((source, step, tuple(result.items())) for source, step, result in rows)
    return by_key(tally)


def merge(total: Counts, part: Counts) -> None:
    """Add the counts ``part`` into ``total``."""
    total.update(part)


def schema_of(scorer: str, options: Mapping[str, Any], sources: Iterable[str]) -> Schema:
    """The result schema of ``scorer`` with ``options`` over the data sources of a run (the
    union of each source's: a name may have one registration per data source).

    Raises:
        PluginError: a declared schema breaks the contract.
    """
    return union(result_schema(scorer, source, options) for source in sorted(set(sources)))


def sources(counts: Counts) -> set[str]:
    """The data sources with counted rows."""
    return {source for source, _, key, _ in counts if key is None}


Group = dict[str, Any]
"""``{"rows": n, "values": {key: {value: count}}}``: one data source, step, or all rows."""


def _groups(counts: Counts) -> tuple[dict[str, Group], dict[int, Group], Group, list[str]]:
    """The counts per data source, per step (rows with a step), overall, and every key seen
    (in order of first appearance)."""
    sources: dict[str, Group] = {}
    steps: dict[int, Group] = {}
    overall: Group = {"rows": 0, "values": {}}
    seen: dict[str, None] = {}
    for (source, step, key, value), n in counts.items():
        targets = [sources.setdefault(source, {"rows": 0, "values": {}}), overall]
        if step is not None:
            targets.append(steps.setdefault(step, {"rows": 0, "values": {}}))
        if key is None:
            for group in targets:
                group["rows"] += n
            continue
        seen[key] = None
        for group in targets:
            values = group["values"].setdefault(key, {})
            values[value] = values.get(value, 0) + n
    return sources, steps, overall, list(seen)


def _arrays(values: Mapping[Any, int]) -> tuple[np.ndarray, np.ndarray]:
    return np.fromiter(values.keys(), float, len(values)), np.fromiter(values.values(), np.int64)


def _bootstrap(group: Group, keys: list[str]) -> dict[str, dict[str, float]]:
    metrics = {}
    for key, values in _complete(group, keys):
        interval = bootstrap_mean_of_counts(*_arrays(values))
        metrics[key] = {"mean": interval.mean, "low": interval.low, "high": interval.high}
    return metrics


def _band(group: Group, keys: list[str]) -> dict[str, dict[str, float]]:
    metrics = {}
    for key, values in _complete(group, keys):
        points, weights = _arrays(values)
        n = int(weights.sum())
        mean = float(np.dot(points, weights) / n)
        spread = 0.0
        if n > 1:
            variance = float(np.dot((points - mean) ** 2, weights)) / (n - 1)
            spread = 1.96 * math.sqrt(variance / n)
        low, high = max(mean - spread, points.min()), min(mean + spread, points.max())
        metrics[key] = {"mean": mean, "low": float(low), "high": float(high)}
    return metrics


def _complete(group: Group, keys: list[str]) -> Iterable[tuple[str, Mapping[Any, int]]]:
    """The keys every row of the group has a value for, in ``keys`` order."""
    for key in keys:
        values = group["values"].get(key)
        if values and sum(values.values()) == group["rows"]:
            yield key, values


def finish(counts: Counts, schema: Schema = SCORE_ONLY) -> dict[str, Any]:
    """The summary of ``counts`` under the scorer's result ``schema``.

    ``{"results": [...], "sources": {data_source: group}, "overall": group, "steps": [{"step":
    n, **group}]}``, sources sorted, steps in step order (empty when no row has a ``step``),
    where a group is ``{"rows": n, "metrics": {key: {"mean", "low", "high"}}}`` holding the keys
    that every row of the group has, and ``results`` lists every key seen as ``{"key", "kind",
    "label", "gdpo"}``: the declared keys in the schema's order, then each undeclared one as a
    ``diagnostic`` (:func:`reward_plugins.results.complete`). Metrics follow that order.
    """
    sources, steps, overall, seen = _groups(counts)
    results = complete(schema, seen)
    keys = [item.key for item in results]
    return {
        "results": [dataclasses.asdict(item) for item in results],
        "sources": {
            name: {"rows": sources[name]["rows"], "metrics": _bootstrap(sources[name], keys)}
            for name in sorted(sources)
        },
        "overall": {"rows": overall["rows"], "metrics": _bootstrap(overall, keys)},
        "steps": [
            {"step": step, "rows": steps[step]["rows"], "metrics": _band(steps[step], keys)}
            for step in sorted(steps)
        ],
    }
