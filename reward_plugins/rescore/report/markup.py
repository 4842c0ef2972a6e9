"""The pieces of the report's HTML: the page's head and style, escaping, number formats, the
cells that name a row, and the tables of example rows."""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Iterable

from reward_plugins.metrics.aggregate import MeanCI
from reward_plugins.rescore.messages import printable
from reward_plugins.rescore.report.charts import Charts
from reward_plugins.rescore.report.rows import RowStats

HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1320px;
       padding: 0 1rem; color: #222; }}
h1 {{ margin-bottom: .3rem; }}
h2 {{ border-bottom: 1px solid #ccc; margin-top: 2rem; }}
.facts {{ font-size: 1.05rem; }}
.note {{ color: #555; font-size: .9rem; }}
.charts {{ display: flex; flex-wrap: wrap; gap: .75rem; }}
figure {{ margin: 0; }}
img.chart {{ width: 620px; max-width: 100%; height: auto; display: block; }}
table {{ border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }}
th, td {{ border: 1px solid #ddd; padding: .25rem .5rem; text-align: left;
          vertical-align: top; }}
caption {{ text-align: left; color: #555; padding: .2rem 0; }}
td.response {{ font-family: ui-monospace, monospace; white-space: pre-wrap;
               word-break: break-word; max-width: 40rem; }}
.muted {{ color: #888; }}
.wide {{ overflow-x: auto; }}
code {{ background: #f4f4f4; padding: 0 .2rem; }}
</style>
</head>
<body>
"""


def figures(charts: Charts, shown: Iterable[tuple[str, str]]) -> str:
    """A ``<figure>`` per ``(chart id, alt text)`` of ``shown``, its PNG from ``charts``
    embedded as a base64 data URI (the PNG holds its own title)."""
    shown_figures = "".join(
        f"<figure><img class='chart' alt='{escape(caption)}' src='data:image/png;base64,"
        f"{base64.b64encode(charts[chart][1]).decode('ascii')}'></figure>\n"
        for chart, caption in shown
    )
    return f"<div class='charts'>\n{shown_figures}</div>\n"


def table_head(caption: str, value_label: str) -> str:
    """The opening of an example table: its caption and its header row."""
    return (
        f"<table>\n<caption>{escape(caption)}</caption>\n<tr><th>row</th><th>step</th>"
        f"<th>data source</th><th>{escape(value_label)}</th><th>reward</th>"
        "<th>response (end)</th></tr>\n"
    )


def example_row(stats: RowStats, value: float) -> str:
    """A row of an example table: where the row is, ``value``, its reward, its response."""
    return (
        f"<tr>{where_cells(stats)}<td>{six_digits(value)}</td><td>{six_digits(stats.score)}</td>"
        f"{response_cell(stats)}</tr>\n"
    )


def anchor(key: str) -> str:
    """The id of a key's indicator heading."""
    return "indicator-" + re.sub(r"[^A-Za-z0-9_-]", "_", key)


def escape(text: str) -> str:
    """``text`` as HTML, a lone surrogate (from a JSON escape) shown as its escape."""
    return html.escape(printable(text), quote=True)


def three_places(value: float) -> str:
    """``value`` with 3 decimals and thousands separators (a dash for NaN)."""
    return "&ndash;" if math.isnan(value) else f"{value:,.3f}"


def six_digits(value: float | None) -> str:
    """``value`` to 6 significant digits (a dash for ``None``)."""
    return "&ndash;" if value is None else f"{value:.6g}"


def band_cell(interval: MeanCI) -> str:
    """A per-step table cell: the mean and, muted, its band (a dash without values)."""
    if not interval.n:
        return "&ndash;"
    return (
        f"{three_places(interval.mean)} <span class='muted'>"
        f"({three_places(interval.low)}&ndash;{three_places(interval.high)})</span>"
    )


def interval_cells(interval: MeanCI) -> str:
    """Three cells: the number of values, the mean and its interval."""
    return (
        f"<td>{interval.n:,}</td><td>{three_places(interval.mean)}</td>"
        f"<td>{three_places(interval.low)} &ndash; {three_places(interval.high)}</td>"
    )


def where_cells(stats: RowStats) -> str:
    """Three cells: the row's file and line, its step and its data source."""
    step = "(none)" if stats.step is None else str(stats.step)
    return (
        f"<td>{escape(stats.file)}:{stats.number}</td><td>{step}</td>"
        f"<td>{escape(stats.data_source)}</td>"
    )


def response_cell(stats: RowStats) -> str:
    """The cell of the response's end (``(empty)`` muted for an empty one)."""
    excerpt = escape(stats.excerpt) or "<span class=muted>(empty)</span>"
    return f"<td class='response'>{excerpt}</td>"


def counted(count: int, noun: str) -> str:
    """``count`` ``noun`` (plural but for 1), e.g. ``1,200 rows``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
