"""The report's HTML page: one self-contained file, the charts embedded as base64 PNGs.

:func:`render_page` reads a :class:`~reward_plugins.rescore.report.run.RunReport` after its last
row and writes its sections in order: the header (facts and notes), the per-step curves and
table, the per-data-source tables, the logged vs re-scored agreement, and the indicators with
their example rows.
"""

from __future__ import annotations

from typing import Any, Protocol

from reward_plugins.rescore.report import series  # MAX_OPEN_GROUPS read at run time
from reward_plugins.rescore.report.aggregate import (
    Agreement,
    Counts,
    Moments,
    RateExamples,
    TopK,
)
from reward_plugins.rescore.report.charts import Charts
from reward_plugins.rescore.report.markup import (
    HEAD,
    anchor,
    band_cell,
    counted,
    escape,
    example_row,
    figures,
    interval_cells,
    response_cell,
    six_digits,
    table_head,
    where_cells,
)
from reward_plugins.rescore.report.series import (
    AGREEMENT,
    AGREEMENT_REL_TOL,
    CURVE_KINDS,
    ENGINE_COLUMNS,
    ENGINE_LABELS,
    ENGINE_SERIES,
    INDICATOR_KINDS,
    UNIFORM_REWARD,
)
from reward_plugins.results import ResultKey, Schema


class RunReport(Protocol):
    """What the page reads of a run (:class:`reward_plugins.rescore.report.RunReport`, which
    renders the page and so is not imported here)."""

    rows: int
    files: set[str]
    columns: dict[str, int]
    steps: dict[int | None, Moments]
    sources: dict[str, Counts]
    agreement: Agreement
    reopened: set[int | None]
    ungrouped: int
    scorer: str | None
    uniform: TopK
    largest: dict[str, TopK]

    @property
    def full_title(self) -> str: ...

    def schema(self) -> Schema: ...

    def rate_examples(self, key: str) -> RateExamples: ...


_NOTES = (
    "Charts and tables follow the scorer's result schema: the reward and its components "
    "per step; rates (on a 0 to 1 axis), counts and lengths as indicators; diagnostics "
    "in the data-source tables only.",
    "Bands on the curves and intervals in the per-step table: 95% normal approximation, "
    "mean ± 1.96·s/√n clipped to the values' range. Intervals in the data-source and "
    "indicator tables: 95% percentile bootstrap (1,000 resamples).",
)


def render_page(report: RunReport, charts: Charts, overall: Counts) -> str:
    """The page of ``report`` (read after its last row), with the PNGs of ``charts`` and the
    run-level counts ``overall`` (every data source's merged)."""
    schema = report.schema()
    parts = [
        HEAD.format(title=escape(report.full_title)),
        _header(report, schema),
        _steps_section(report, charts, schema),
        _sources_section(report, overall, schema),
        _agreement_section(report.agreement, charts),
        _indicators_section(report, charts, overall, schema),
        "</body>\n</html>\n",
    ]
    return "".join(parts)


# ------------------------------------------------------------------------------ sections


def _header(report: RunReport, schema: Schema) -> str:
    steps = [step for step in report.steps if step is not None]
    facts = [
        counted(report.rows, "row"),
        counted(len(steps), "step") if steps else "no step column",
        counted(len(report.sources), "data source"),
        counted(len(report.files), "file"),
    ]
    if report.scorer:
        facts.append(f"scorer <code>{escape(report.scorer)}</code>")
    facts.append(f"logged score on {report.agreement.logged:,} rows")
    notes = list(_NOTES)
    diagnostics = [item for item in schema if item.kind == "diagnostic"]
    if diagnostics:
        listed = ", ".join(f"<code>{escape(item.key)}</code>" for item in diagnostics)
        notes.append(f"Diagnostics (tabulated, not charted): {listed}.")
    if report.reopened:
        notes.append(
            f"Steps that came back after rows of other steps: {len(report.reopened):,}; their "
            "GRPO groups were formed separately in each run of rows."
        )
    if report.ungrouped:
        notes.append(
            f"{report.ungrouped:,} rows were left out of the GRPO groups (more than "
            f"{series.MAX_OPEN_GROUPS:,} distinct inputs in one step)."
        )
    return (
        f"<header><h1>{escape(report.full_title)}</h1>\n<p class='facts'>{' · '.join(facts)}</p>\n"
        + "".join(f"<p class='note'>{note}</p>\n" for note in notes)
        + "</header>\n"
    )


def _steps_section(report: RunReport, charts: Charts, schema: Schema) -> str:
    out = ["<section id='steps'><h2>Per step</h2>\n"]
    shown = [
        (f"step:{item.key}", item.label)
        for item in schema
        if item.kind in CURVE_KINDS and f"step:{item.key}" in charts
    ]
    if shown:
        out.append(figures(charts, shown))
    elif len([step for step in report.steps if step is not None]) < 2:
        out.append("<p>Fewer than two steps: no curves; the table holds the values.</p>\n")
    present = [
        (label, index)
        for label, index in _charted(report, schema)
        if any(moments.has(index) for moments in report.steps.values())
    ]
    out.append(f"<details{'' if shown else ' open'}><summary>Per-step table</summary>\n")
    out.append("<div class='wide'><table>\n<tr><th>step</th><th>rows</th>")
    out.extend(f"<th>{escape(label)}</th>" for label, _ in present)
    out.append("</tr>\n")
    for step in sorted(report.steps, key=lambda s: (s is None, s or 0)):
        moments = report.steps[step]
        out.append(f"<tr><td>{'(none)' if step is None else step}</td><td>{moments.rows}</td>")
        out.extend(f"<td>{band_cell(moments.band(index))}</td>" for _, index in present)
        out.append("</tr>\n")
    out.append("</table></div></details>\n</section>\n")
    return "".join(out)


def _charted(report: RunReport, schema: Schema) -> list[tuple[str, int]]:
    """``(label, column)`` of every charted series, in page order."""
    keys = [item for item in schema if item.kind in CURVE_KINDS]
    keys += [item for item in schema if item.kind in INDICATOR_KINDS]
    return [(item.label, report.columns[item.key]) for item in keys] + [
        (ENGINE_LABELS[series], ENGINE_COLUMNS[series]) for series in ENGINE_SERIES
    ]


def _sources_section(report: RunReport, overall: Counts, schema: Schema) -> str:
    out = ["<section id='sources'><h2>Per data source</h2>\n"]
    tables = [(source, report.sources[source]) for source in sorted(report.sources)]
    if len(tables) > 1:
        tables.append(("all data sources", overall))
    series = [(item.label, item.kind, report.columns[item.key]) for item in schema]
    series += [(ENGINE_LABELS[s], "rate", ENGINE_COLUMNS[s]) for s in ENGINE_SERIES]
    for name, counts in tables:
        out.append(f"<h3>{escape(name)}</h3>\n<p>{counts.rows:,} rows</p>\n<table>\n")
        out.append("<tr><th>series</th><th>kind</th><th>n</th><th>mean</th><th>95% CI</th></tr>\n")
        for label, kind, index in series:
            interval = counts.interval(index)
            if interval.n:
                out.append(
                    f"<tr><td>{escape(label)}</td><td>{kind}</td>{interval_cells(interval)}</tr>\n"
                )
        out.append("</table>\n")
    return "".join(out) + "</section>\n"


def _agreement_section(agreement: Agreement, charts: Charts) -> str:
    out = ["<section id='agreement'><h2>Logged vs re-scored</h2>\n"]
    if not agreement.logged:
        out.append(
            "<p>No row has both a numeric logged <code>score</code> and a re-scored one.</p>\n"
        )
        return "".join(out) + "</section>\n"
    rate = agreement.agreeing / agreement.logged
    out.append(
        f"<p>Agreement: <strong>{rate:.1%}</strong> ({agreement.agreeing:,} of "
        f"{agreement.logged:,} rows with a numeric logged <code>score</code>); equal means "
        f"within a relative tolerance of {AGREEMENT_REL_TOL:g}.</p>\n"
    )
    out.append(_confusion(agreement))
    if f"step:@{AGREEMENT}" in charts:
        out.append(figures(charts, [(f"step:@{AGREEMENT}", ENGINE_LABELS[AGREEMENT])]))
    rows = agreement.disagreeing.best()
    if rows:
        out.append("<h3>Disagreeing rows (largest difference first)</h3>\n<table>\n")
        out.append(
            "<tr><th>row</th><th>step</th><th>data source</th><th>logged</th>"
            "<th>re-scored</th><th>response (end)</th></tr>\n"
        )
        for _, stats in rows:
            out.append(
                f"<tr>{where_cells(stats)}<td>{six_digits(stats.logged)}</td><td>{six_digits(stats.score)}</td>"
                f"{response_cell(stats)}</tr>\n"
            )
        out.append("</table>\n")
    return "".join(out) + "</section>\n"


def _confusion(agreement: Agreement) -> str:
    """Rows: logged; columns: re-scored; exact values when each side has at most 6."""
    pairs = agreement.pairs
    labels: dict[Any, str]
    if pairs is not None and max(len({p[0] for p in pairs}), len({p[1] for p in pairs})) <= 6:
        cells: dict[Any, int] = dict(pairs)
        logged = sorted({pair[0] for pair in pairs})
        scored = sorted({pair[1] for pair in pairs})
        labels = {value: six_digits(value) for value in {*logged, *scored}}
        caption = "exact values"
    else:
        cells = dict(agreement.buckets)
        logged = scored = [-1, 0, 1]
        labels = {-1: "negative", 0: "zero", 1: "positive"}
        caption = "values bucketed by sign"
    out = [
        f"<table class='confusion'><caption>rows by logged (row) and re-scored (column) "
        f"score, {caption}</caption>\n<tr><th>logged \\ re-scored</th>"
    ]
    out.extend(f"<th>{labels[value]}</th>" for value in scored)
    out.append("</tr>\n")
    for row in logged:
        out.append(f"<tr><th>{labels[row]}</th>")
        out.extend(f"<td>{cells.get((row, column), 0):,}</td>" for column in scored)
        out.append("</tr>\n")
    return "".join(out) + "</table>\n"


def _indicators_section(report: RunReport, charts: Charts, overall: Counts, schema: Schema) -> str:
    indicators = [item for item in schema if item.kind in INDICATOR_KINDS]
    out = [
        "<section id='indicators'><h2>Indicators</h2>\n",
        "<p>The scorer's rates, counts and lengths, and the GRPO groups whose rows all got "
        "one reward (GRPO learns nothing from them: every advantage is 0).</p>\n<table>\n",
        "<tr><th>indicator</th><th>key</th><th>kind</th><th>n</th><th>mean</th>"
        "<th>95% CI</th><th>max</th></tr>\n",
    ]
    rows = [(item.label, item.key, item.kind, report.columns[item.key]) for item in indicators]
    rows.append(
        (ENGINE_LABELS[UNIFORM_REWARD], UNIFORM_REWARD, "rate", ENGINE_COLUMNS[UNIFORM_REWARD])
    )
    for label, key, kind, index in rows:
        interval = overall.interval(index)
        seen = overall.distribution(index)
        out.append(
            f"<tr><td><a href='#{escape(anchor(key))}'>{escape(label)}</a></td>"
            f"<td><code>{escape(key)}</code></td><td>{kind}</td>{interval_cells(interval)}"
            f"<td>{six_digits(max(seen)) if seen else '&ndash;'}</td></tr>\n"
        )
    out.append("</table>\n")
    for item in indicators:
        out.append(f"<h3 id='{escape(anchor(item.key))}'>{escape(item.label)}</h3>\n")
        shown = [(f"step:{item.key}", item.label), (f"dist:{item.key}", item.label)]
        shown = [(chart, label) for chart, label in shown if chart in charts]
        if shown:
            out.append(figures(charts, shown))
        if item.kind == "rate":
            out.append(_rate_table(report, item))
        else:
            out.append(_largest_table(report, item))
    out.append(_uniform_reward(report, charts))
    return "".join(out) + "</section>\n"


def _uniform_reward(report: RunReport, charts: Charts) -> str:
    out = [
        f"<h3 id='{anchor(UNIFORM_REWARD)}'>{ENGINE_LABELS[UNIFORM_REWARD]}</h3>\n",
        "<p>Among the GRPO groups of a step (its rows with an identical <code>input</code>) "
        "that hold 2 rows or more, the share whose rows all have the same re-scored "
        "<code>score</code>.</p>\n",
    ]
    if f"step:@{UNIFORM_REWARD}" in charts:
        out.append(figures(charts, [(f"step:@{UNIFORM_REWARD}", ENGINE_LABELS[UNIFORM_REWARD])]))
    groups = report.uniform.best()
    if not groups:
        out.append("<p>No group of 2 rows or more got one reward.</p>\n")
    else:
        out.append(table_head("largest group first; its first row", "rows in group"))
        out.extend(example_row(stats, size) for size, stats in groups)
        out.append("</table>\n")
    return "".join(out)


def _rate_table(report: RunReport, item: ResultKey) -> str:
    examples = report.rate_examples(item.key)
    value = six_digits(examples.value)
    if not examples.rows:
        return f"<p>No row has {escape(item.label)} = {value}.</p>\n"
    rarer = "rarer value" if examples.share < 0.5 else "value as frequent as the other"
    caption = (
        f"rows where {item.label} = {value} (the {rarer}: {examples.share:.1%} of the rows "
        "with the key), highest reward first"
    )
    out = [table_head(caption, item.label)]
    out.extend(example_row(stats, examples.value) for stats in examples.rows)
    return "".join(out) + "</table>\n"


def _largest_table(report: RunReport, item: ResultKey) -> str:
    kept = report.largest.get(item.key)
    rows = kept.best() if kept is not None else []
    if not rows:
        return "<p>No example rows.</p>\n"
    out = [table_head(f"largest {item.label} first", item.label)]
    out.extend(example_row(stats, value) for value, stats in rows)
    return "".join(out) + "</table>\n"
