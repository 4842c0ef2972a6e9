"""The report's charts: which are drawn (:func:`chart_plan`), their y-axes (:func:`value_axis`)
and their PNGs, drawn with matplotlib's Agg canvas (:func:`render_charts`)."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from reward_plugins.metrics.aggregate import MeanCI
from reward_plugins.rescore.errors import ReportError
from reward_plugins.rescore.report.aggregate import Counts, Moments
from reward_plugins.rescore.report.series import (
    CURVE_KINDS,
    ENGINE_COLUMNS,
    ENGINE_LABELS,
    ENGINE_SERIES,
    INDICATOR_KINDS,
)
from reward_plugins.results import Schema

if TYPE_CHECKING:
    from matplotlib.axes import Axes

Charts = Mapping[str, tuple[str, bytes]]
"""Rendered charts: chart id (``step:KEY``, ``dist:KEY``, ``step:@SERIES``) -> (file name,
PNG)."""

_COLORS = {"reward": "#1f77b4", "component": "#1f77b4", "rate": "#c0392b"}


class Chart(NamedTuple):
    """One chart: a per-step curve (``steps`` and ``bands``) or a distribution (``counts``)."""

    chart_id: str
    name: str
    label: str
    kind: str
    steps: Sequence[int]
    bands: Sequence[MeanCI]
    counts: Mapping[float, int]


def value_axis(kind: str, low: float, high: float) -> tuple[float, float] | None:
    """The y-axis of a per-step curve of a series of ``kind`` whose bands span ``low`` to
    ``high``: a rate on [0, 1]; a count or a length from 0; a reward or a component on
    [0, 1] when its values lie there; ``None`` (matplotlib's own) otherwise.

    Example:
        >>> value_axis("rate", 0.0, 0.0), value_axis("count", 0.0, 20.0)
        ((0.0, 1.0), (0.0, 21.0))
        >>> value_axis("component", 0.2, 0.9), value_axis("reward", -1.0, 1.0)
        ((0.0, 1.0), None)
    """
    if kind == "rate":
        return (0.0, 1.0)
    if kind in ("count", "length"):
        return (0.0, max(high * 1.05, 1.0))
    if low >= 0.0 and high <= 1.0:
        return (0.0, 1.0)
    return None


def require_plotting() -> None:
    """Check that the charts can be drawn (before a run is scored for nothing).

    Raises:
        ReportError: matplotlib is not installed.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ReportError(
            f'the report needs matplotlib ({error}): pip install "reward-plugins[report]"'
        ) from None


def chart_plan(
    schema: Schema,
    steps: Mapping[int | None, Moments],
    columns: Mapping[str, int],
    overall: Counts,
) -> list[Chart]:
    """Every chart of the page, in page order: per-step curves of the reward and the
    components, then per indicator its curve (and its distribution for counts and lengths),
    then the engine's two series. A curve needs two steps or more and a value; ``columns``
    gives each key's column in ``steps`` and ``overall``."""
    numbered = sorted(step for step in steps if step is not None)
    shown = numbered if len(numbered) >= 2 else []
    plan: list[Chart] = []
    names: set[str] = set()

    def curve(chart_id: str, name: str, label: str, kind: str, index: int) -> None:
        bands = [steps[step].band(index) for step in shown]
        if any(band.n for band in bands):
            plan.append(Chart(chart_id, _unique(name, names), label, kind, shown, bands, {}))

    charted = [item for item in schema if item.kind in CURVE_KINDS]
    charted += [item for item in schema if item.kind in INDICATOR_KINDS]
    for item in charted:
        index = columns[item.key]
        curve(f"step:{item.key}", item.key, item.label, item.kind, index)
        seen = overall.distribution(index)
        if item.kind in ("count", "length") and seen:
            name = _unique(f"{item.key}_distribution", names)
            plan.append(Chart(f"dist:{item.key}", name, item.label, item.kind, [], [], seen))
    for series in ENGINE_SERIES:
        curve(f"step:@{series}", series, ENGINE_LABELS[series], "rate", ENGINE_COLUMNS[series])
    return plan


def render_charts(plan: Sequence[Chart]) -> dict[str, tuple[str, bytes]]:
    """Each chart of ``plan`` as a PNG (its title the label, its y-axis range in its
    ``Description`` text chunk, e.g. ``y from 0 to 1``), by chart id.

    Raises:
        ReportError: matplotlib is not installed.
    """
    require_plotting()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    charts: dict[str, tuple[str, bytes]] = {}
    for chart in plan:
        figure = Figure(figsize=(6.4, 3.2), dpi=100)
        FigureCanvasAgg(figure)  # Agg explicitly: no GUI backend, no pyplot state
        figure.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.15)
        axes = figure.add_subplot()
        color = _COLORS.get(chart.kind, "#8e44ad")
        if chart.counts:
            _draw_distribution(axes, chart, color)
        else:
            _draw_curve(axes, chart, color)
        axes.grid(alpha=0.3)
        bottom, top = axes.get_ylim()
        buffer = io.BytesIO()
        figure.savefig(
            buffer,
            format="png",
            metadata={"Title": chart.label, "Description": f"y from {bottom:g} to {top:g}"},
        )
        charts[chart.chart_id] = (chart.name, buffer.getvalue())
    return charts


def _draw_distribution(axes: Axes, chart: Chart, color: str) -> None:
    """Bars of the counts of a few whole values, else a 30-bin histogram."""
    from matplotlib.ticker import MaxNLocator

    values = np.fromiter(chart.counts.keys(), float, len(chart.counts))
    weights = np.fromiter(chart.counts.values(), float, len(chart.counts))
    if len(values) <= 40 and np.all(values == np.round(values)):
        axes.bar(values, weights, width=0.8, color=color)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        axes.hist(values, bins=30, weights=weights, color=color)
    axes.set_title(f"{chart.label}: distribution over the run")
    axes.set_ylabel("rows")
    axes.set_xlabel(chart.label)


def _draw_curve(axes: Axes, chart: Chart, color: str) -> None:
    """The per-step mean with its band, on the axis of :func:`value_axis`."""
    from matplotlib.ticker import MaxNLocator

    x = np.array(chart.steps, dtype=float)
    mean, low, high = (np.array([band[i] for band in chart.bands]) for i in range(3))
    axes.fill_between(x, low, high, color=color, alpha=0.25, linewidth=0)
    axes.plot(
        x, mean, color=color, linewidth=1.5, marker="o" if len(x) <= 60 else "", clip_on=False
    )
    limits = value_axis(chart.kind, float(np.nanmin(low)), float(np.nanmax(high)))
    if limits is not None:
        axes.set_ylim(*limits)
    axes.set_title(chart.label)
    axes.set_xlabel("step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _unique(key: str, taken: set[str]) -> str:
    """A file name for ``key``: letters, digits, ``_``, ``-`` and ``.`` kept, any other
    character as ``_``, not starting with ``.``, and ``_2``, ``_3``... added to one already
    taken."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", key).lstrip(".") or "key"
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    taken.add(candidate)
    return candidate
