"""The parent's half of the report: :class:`RunReport` folds each row's :class:`RowStats` into
bounded aggregates, reads them back, and writes the page and the PNGs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from reward_plugins.errors import RewardPluginsError
from reward_plugins.metrics.aggregate import MeanCI
from reward_plugins.rescore.errors import ReportError
from reward_plugins.rescore.files import atomic_output
from reward_plugins.rescore.messages import printable
from reward_plugins.rescore.report import series  # MAX_OPEN_GROUPS read at run time
from reward_plugins.rescore.report.aggregate import (
    Agreement,
    Counts,
    Group,
    Moments,
    RateExamples,
    TopK,
)
from reward_plugins.rescore.report.charts import chart_plan, render_charts
from reward_plugins.rescore.report.page import render_page
from reward_plugins.rescore.report.rows import RowStats
from reward_plugins.rescore.report.series import (
    AGREEMENT,
    DEFAULT_EXAMPLES,
    ENGINE_COLUMNS,
    ENGINE_SERIES,
    MAX_EXPERIMENTS,
    UNIFORM_REWARD,
)
from reward_plugins.results import SCORE_ONLY, Schema, complete, union

SchemaOf = Callable[[str], Schema]
"""A data source's result schema (``lambda source: result_schema(scorer, source, options)``)."""

_NO_STEP = object()
_BLOCK_ROWS = 4096


class RunReport:
    """Aggregates of a re-scored run, rendered as a self-contained HTML page and PNG charts.

    Feed it :func:`describe_row` results, in input order, with :meth:`add`; read
    (:meth:`schema`, :meth:`per_step`, :meth:`worst`, :meth:`rate_examples`) and write
    (:meth:`write_html`, :meth:`write_pngs`) after the last row: each closes the current step's
    GRPO groups. ``title`` names the run (see :func:`run_name`); ``examples`` is the number of
    example rows kept per indicator; ``scorer`` the scorer's name for the page header;
    ``schema_of`` gives a data source's result schema (called once per data source; without
    it every source is :data:`~reward_plugins.results.SCORE_ONLY`, so every key but ``score``
    is a diagnostic).

    The aggregates the page reads (not to be changed from outside): ``rows``, ``files``,
    ``columns`` (each result key's column), ``steps`` (step -> :class:`Moments`), ``sources``
    (data source -> :class:`Counts`), ``agreement``, ``uniform`` and ``largest`` (the example
    rows of the one-reward groups and of each count or length key), ``reopened`` (steps that
    came back) and ``ungrouped`` (rows past :data:`MAX_OPEN_GROUPS`).

    Raises:
        ReportError: ``examples`` is negative.
    """

    def __init__(
        self,
        *,
        title: str,
        examples: int = DEFAULT_EXAMPLES,
        scorer: str | None = None,
        schema_of: SchemaOf | None = None,
    ) -> None:
        if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
            raise ReportError(f"examples must be an int, 0 or more, got {examples!r}")
        self.title = title
        self.examples = examples
        self.scorer = scorer
        self.rows = 0
        self.files: set[str] = set()
        self.columns: dict[str, int] = {}
        self.steps: dict[int | None, Moments] = {}
        self.sources: dict[str, Counts] = {}
        self.agreement = Agreement(examples)
        self.uniform = TopK(examples)
        self.largest: dict[str, TopK] = {}
        self.reopened: set[int | None] = set()
        self.ungrouped = 0
        self._schema_of = schema_of
        self._schemas: dict[str, Schema] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        self._rates: dict[str, tuple[TopK, TopK]] = {}
        self._experiments: dict[str, None] = {}
        self._more_experiments = False
        self._open: Any = _NO_STEP
        self._block: list[tuple[tuple[tuple[str, float], ...], float | None]] = []
        self._block_sources: list[str] = []
        self._groups: dict[str, Group] = {}
        self._closed: set[int | None] = set()
        self._charts: dict[str, tuple[str, bytes]] | None = None

    # --------------------------------------------------------------------------- adding

    def add(self, stats: RowStats) -> None:
        """Fold one row into the aggregates (rows of one step are expected to be contiguous;
        see the package docstring for a step that comes back).

        Raises:
            ReportError: ``schema_of`` refused the row's data source (the message names it).
        """
        kinds = self._kinds_of(stats.data_source)
        if stats.step != self._open:
            self._switch(stats.step)
        self.rows += 1
        self.files.add(stats.file)
        agreement = None
        if stats.logged is not None and stats.score is not None:
            agreement = self.agreement.add(stats.logged, stats.score, stats)
        self._keep_examples(stats, kinds)
        self._block.append((stats.values, agreement))
        self._block_sources.append(stats.data_source)
        if len(self._block) >= _BLOCK_ROWS:
            self._flush()
        if stats.group is not None:
            self._group(stats.group, stats)
        if stats.experiment is not None and stats.experiment not in self._experiments:
            if len(self._experiments) < MAX_EXPERIMENTS:
                self._experiments[stats.experiment] = None
            else:
                self._more_experiments = True
        self._charts = None

    def _keep_examples(self, stats: RowStats, kinds: Mapping[str, str]) -> None:
        """Give each key a column, and offer the row to its rate's or count's examples."""
        score = stats.score
        rank = -math.inf if score is None else score
        for key, value in stats.values:
            if key not in self.columns:
                self.columns[key] = len(self.columns) + len(ENGINE_SERIES)
            kind = kinds.get(key, "diagnostic")
            if kind == "rate":
                self._rate_rows(key)[value != 0].offer(rank, stats)
            elif kind in ("count", "length"):
                largest = self.largest.get(key)
                if largest is None:
                    largest = self.largest[key] = TopK(self.examples)
                largest.offer(value, stats)

    def _kinds_of(self, source: str) -> dict[str, str]:
        kinds = self._kinds.get(source)
        if kinds is None:
            schema = SCORE_ONLY
            if self._schema_of is not None:
                try:
                    schema = self._schema_of(source)
                except RewardPluginsError as error:
                    raise ReportError(
                        f"no result schema for data source {printable(source)!r}: {error}"
                    ) from None
            self._schemas[source] = schema
            kinds = self._kinds[source] = {item.key: item.kind for item in schema}
        return kinds

    def _rate_rows(self, key: str) -> tuple[TopK, TopK]:
        rows = self._rates.get(key)
        if rows is None:
            rows = self._rates[key] = (TopK(self.examples), TopK(self.examples))
        return rows

    def _group(self, key: str, stats: RowStats) -> None:
        group = self._groups.get(key)
        if group is None:
            if len(self._groups) < series.MAX_OPEN_GROUPS:
                self._groups[key] = Group(stats)
            else:
                self.ungrouped += 1
            return
        group.size += 1
        if group.score is not None and stats.score != group.score:
            group.score = None

    def _switch(self, step: int | None) -> None:
        self._finish_step()
        if step in self._closed:
            self.reopened.add(step)
        self._open = step
        if step not in self.steps:
            self.steps[step] = Moments()

    def _flush(self) -> None:
        """Fold the buffered rows (all of the current step) into the aggregates."""
        if not self._block:
            return
        columns = self.columns
        values = np.full((len(self._block), len(columns) + len(ENGINE_SERIES)), np.nan)
        for row, (items, agreement) in enumerate(self._block):
            if agreement is not None:
                values[row, ENGINE_COLUMNS[AGREEMENT]] = agreement
            for key, value in items:
                values[row, columns[key]] = value
        self.steps[self._open].add_block(values)
        sources = self._block_sources
        if len(set(sources)) == 1:
            self._source(sources[0]).add_block(values)
        else:
            for source in dict.fromkeys(sources):
                chosen = np.fromiter((s == source for s in sources), bool, len(sources))
                self._source(source).add_block(values[chosen])
        self._block, self._block_sources = [], []

    def _source(self, source: str) -> Counts:
        counts = self.sources.get(source)
        if counts is None:
            counts = self.sources[source] = Counts()
        return counts

    def _finish_step(self) -> None:
        """Flush the buffer and close the current step's groups into its one-reward rate."""
        self._flush()
        if self._open is _NO_STEP:
            return
        moments = self.steps[self._open]
        index = ENGINE_COLUMNS[UNIFORM_REWARD]
        for group in self._groups.values():
            if group.size >= 2:
                value = 0.0 if group.score is None else 1.0
                moments.add_value(index, value)
                self._source(group.first.data_source).add_value(index, value)
                if group.score is not None:
                    self.uniform.offer(group.size, group.first)
        self._groups = {}
        self._closed.add(self._open)
        self._open = _NO_STEP

    # --------------------------------------------------------------------------- reading

    def schema(self) -> Schema:
        """The keys the report shows: every data source's declared keys that some row holds,
        in declaration order (the first declaration of a key wins), then the keys rows hold
        that no schema declares, as ``diagnostic``."""
        return complete(union(self._schemas.values()), self.columns)

    @property
    def experiments(self) -> tuple[str, ...]:
        """The distinct experiment names of the rows (at most :data:`MAX_EXPERIMENTS`)."""
        return tuple(self._experiments)

    @property
    def full_title(self) -> str:
        """The page title: ``title``, then the experiment names the rows carry."""
        shown = [name for name in self._experiments if name != self.title]
        if not shown:
            return self.title
        more = ", …" if self._more_experiments else ""
        return f"{self.title} · experiment {', '.join(shown)}{more}"

    def per_step(self, series: str) -> dict[int | None, MeanCI]:
        """The per-step means and bands of ``series`` (a result key, or one of
        :data:`ENGINE_SERIES`), as the curves and the per-step table show them; steps without
        a value are left out.

        Raises:
            ReportError: no row holds ``series``.
        """
        self._finish_step()
        index = self._index(series)
        bands = {step: moments.band(index) for step, moments in self.steps.items()}
        return {step: band for step, band in bands.items() if band.n}

    def overall(self, series: str) -> MeanCI:
        """The mean of ``series`` over the run with its 95% bootstrap interval.

        Raises:
            ReportError: no row holds ``series``.
        """
        self._finish_step()
        return self._overall().interval(self._index(series))

    def worst(self, indicator: str) -> list[RowStats]:
        """The example rows of ``indicator``, the worst first: for a ``count`` or ``length``
        key the largest values; for a ``rate`` key those of :meth:`rate_examples`;
        ``"disagreement"``: the largest logged vs re-scored differences;
        :data:`UNIFORM_REWARD`: the first row of the largest one-reward groups.

        Raises:
            ReportError: ``indicator`` is none of these.
        """
        self._finish_step()
        if indicator == "disagreement":
            kept = self.agreement.disagreeing
        elif indicator == UNIFORM_REWARD:
            kept = self.uniform
        elif indicator in self._rates:
            return self.rate_examples(indicator).rows
        elif indicator in self.largest:
            kept = self.largest[indicator]
        else:
            raise ReportError(f"unknown indicator {indicator!r}")
        return [stats for _, stats in kept.best()]

    def rate_examples(self, key: str) -> RateExamples:
        """The example rows of rate key ``key``.

        Raises:
            ReportError: ``key`` is no rate key of any row.
        """
        self._finish_step()
        rows = self._rates.get(key)
        if rows is None:
            raise ReportError(f"unknown rate {key!r}")
        seen = self._overall().distribution(self.columns[key])
        total = sum(seen.values())
        fired = sum(count for value, count in seen.items() if value != 0)
        value = 1.0 if fired <= total - fired else 0.0
        share = (fired if value else total - fired) / total if total else math.nan
        return RateExamples(value, share, [stats for _, stats in rows[int(value)].best()])

    def _index(self, series: str) -> int:
        index = ENGINE_COLUMNS.get(series, self.columns.get(series))
        if index is None:
            valid = ", ".join([*ENGINE_SERIES, *self.columns])
            raise ReportError(f"unknown series {series!r}; valid: {valid}")
        return index

    def _overall(self) -> Counts:
        overall = Counts()
        for counts in self.sources.values():
            overall.merge(counts)
        return overall

    # --------------------------------------------------------------------------- writing

    def write_html(self, path: Path) -> None:
        """Write the page to ``path`` through a temporary file renamed onto it
        (:func:`reward_plugins.rescore.files.atomic_output`).

        Raises:
            ReportError: matplotlib is not installed.
            PathError: the file cannot be written.
        """
        charts = self._render()
        page = render_page(self, charts, self._overall()).encode("utf-8")
        with atomic_output(Path(path)) as temporary:
            temporary.write_bytes(page)

    def write_pngs(self, directory: Path) -> list[Path]:
        """Write every chart of the page into ``directory`` (created if missing), one
        ``{name}.png`` each (a result key's name, made safe for a file name, or an engine
        series'), and return their paths.

        Raises:
            ReportError: matplotlib is not installed.
            PathError: a file cannot be written.
        """
        charts = self._render()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, png in charts.values():
            path = directory / f"{name}.png"
            with atomic_output(path) as temporary:
                temporary.write_bytes(png)
            paths.append(path)
        return paths

    def _render(self) -> dict[str, tuple[str, bytes]]:
        """The charts, chart id -> (file name, PNG), rendered once per set of rows."""
        self._finish_step()
        if self._charts is None:
            plan = chart_plan(self.schema(), self.steps, self.columns, self._overall())
            self._charts = render_charts(plan)
        return self._charts
