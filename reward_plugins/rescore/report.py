"""The run report: one self-contained HTML page (and PNG charts) for a re-scored run.

What the page charts comes from the scorer's result schema (:mod:`reward_plugins.results`),
not from the response text: the engine knows no scorer's keys.

- ``reward`` and ``component`` keys: a per-step curve of the mean with its band.
- ``rate`` keys: an indicator, a per-step curve on a [0, 1] axis, the rate over the run, and
  example rows of the rarer value (the rows where the rule fired, or where it did not when it
  fired on most rows), the highest reward first.
- ``count`` and ``length`` keys: an indicator, a per-step curve of the mean, the distribution
  over the run, and the rows with the largest values.
- ``diagnostic`` keys (and keys a result holds that its schema does not declare): tabulated per
  data source, never charted.

Two series come from every run whatever the scorer: the agreement of the dump's logged ``score``
with the re-scored one, and the share of GRPO groups whose rows all got one reward (groups
that give GRPO no signal: every advantage is 0).

Two halves, split so that the per-row part runs where the rows are scored:

- :func:`describe_row` runs in the worker processes on every :class:`ScoredRow` and returns a
  compact, picklable :class:`RowStats`: the result's numeric values, the logged score, the
  GRPO group key and the response's end (shown as text, never scored).
- :class:`RunReport` runs in the parent process: :meth:`RunReport.add` folds each row into
  aggregates whose size does not grow with the number of rows, and :meth:`RunReport.write_html`
  / :meth:`RunReport.write_pngs` render them. It reads each data source's schema once, through
  ``schema_of`` (the CLI passes :func:`reward_plugins.router.result_schema`).

Memory, for any number of rows: per step, five numbers per series (count, sum, sum of squares,
minimum, maximum); per data source, the count of each distinct value per series; at most
``examples`` rows per indicator (twice that per rate); the GRPO groups of the current step only
(at most :data:`MAX_OPEN_GROUPS`), and a buffer of at most 4,096 rows of values.

Intervals: each point of a per-step curve has a normal-approximation band, mean
± 1.96·s/√n (s the sample standard deviation), clipped to the range of the step's values; the
per-data-source tables and the run-level indicators have 95% percentile-bootstrap intervals
(:func:`reward_plugins.metrics.aggregate.bootstrap_mean_of_counts`, 1,000 resamples, seed 0).

GRPO groups: verl's trainer writes one ``{step}.jsonl`` per step with the columns ``input``,
``output``, ``gts``, ``score`` and ``step`` (``RayPPOTrainer._write_generations`` in
``verl/trainer/ppo/ray_trainer.py``); the rollouts of one prompt share its decoded ``input``.
A group is the rows of one step with the same ``input``. Groups are tracked only while their
step is the current one: rows of another step close them. A step whose rows come back later
(split over files, or rows added after a write) starts new groups, so a prompt whose rollouts
straddle the two runs of rows counts as two groups; the page counts such steps.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import html
import io
import json
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from reward_plugins.errors import RewardPluginsError
from reward_plugins.metrics.aggregate import MeanCI, bootstrap_mean_of_counts
from reward_plugins.rescore.files import atomic_output
from reward_plugins.rescore.messages import printable
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.results import SCORE_ONLY, ResultKey, Schema, complete, union

EXCERPT_CHARS = 200
"""Longest excerpt of a response (its end) and experiment name a :class:`RowStats` keeps."""

DEFAULT_EXAMPLES = 5
"""Example rows shown per indicator by default."""

MAX_OPEN_GROUPS = 50_000
"""GRPO groups tracked per step; rows of further ``input`` values are left out of the
one-reward-groups indicator (the page says how many)."""

AGREEMENT_REL_TOL = 1e-6
"""Relative tolerance of logged vs re-scored equality: verl logs the sum of float32 token-level
scores, so 2/3 comes back as 0.6666666865."""

MAX_EXPERIMENTS = 3
"""Distinct experiment names the title shows; the page counts the others."""

AGREEMENT = "agreement"
"""The series of rows whose logged ``score`` equals the re-scored one (1) or not (0)."""

UNIFORM_REWARD = "uniform_reward"
"""The series of GRPO groups of 2 rows or more whose rows all got one reward (1) or not (0)."""

ENGINE_SERIES: tuple[str, ...] = (AGREEMENT, UNIFORM_REWARD)
"""The series every run has, whatever the scorer; a result key of the same name is reachable
in the tables but not through :meth:`RunReport.per_step`."""

CURVE_KINDS: tuple[str, ...] = ("reward", "component")
"""Kinds charted as per-step curves in the page's "Per step" section."""

INDICATOR_KINDS: tuple[str, ...] = ("rate", "count", "length")
"""Kinds shown as indicators: a curve, a run-level value and example rows."""

GENERIC_NAMES: frozenset[str] = frozenset({
    ".", "ckpt", "ckpts", "checkpoint", "checkpoints", "data", "dump", "dumps", "generations",
    "logs", "output", "outputs", "rollout", "rollout_data", "rollouts", "test", "train", "val",
    "validation", "validation_data",
})  # fmt: skip
"""Path components that name no run (verl's dump folders, checkpoint roots): :func:`run_name`
looks past them."""

_FORMAT_SUFFIX = re.compile(r"(\.jsonl\.gz|\.jsonl|\.parquet|\.json)$")

_ENGINE_LABELS = {
    AGREEMENT: "logged = re-scored",
    UNIFORM_REWARD: "GRPO groups with one reward",
}
_ENGINE_COLUMNS = {AGREEMENT: 0, UNIFORM_REWARD: 1}

SchemaOf = Callable[[str], Schema]
"""A data source's result schema (``lambda source: result_schema(scorer, source, options)``)."""


# ------------------------------------------------------------------------------ the row


class RowStats(NamedTuple):
    """What the report keeps of one scored row (see :func:`describe_row`)."""

    file: str
    number: int
    step: int | None
    data_source: str
    group: str | None
    """Stable 64-bit BLAKE2b hex digest of the row's ``input`` (``None`` without one)."""
    values: tuple[tuple[str, float], ...]
    """The result's keys holding a finite number (a bool as 0 or 1), in the result's order."""
    logged: float | None
    """The record's own ``score`` when it is a finite number."""
    excerpt: str
    """The response's end, cut to :data:`EXCERPT_CHARS` (``…`` marks a cut)."""
    experiment: str | None = None
    """The record's ``experiment_name`` (or its ``extra_info``'s), when it is a string."""

    def value(self, key: str) -> float | None:
        """The value of result key ``key``, ``None`` when the result holds no number there."""
        for name, value in self.values:
            if name == key:
                return value
        return None

    @property
    def score(self) -> float | None:
        """The re-scored reward (the result's ``score``)."""
        return self.value("score")


def describe_row(row: ScoredRow) -> RowStats:
    """Describe one scored row for :meth:`RunReport.add`, in time linear in its size.

    Every value comes from ``row.result`` (the scorer's own keys); the response is kept only
    as an excerpt to show. Never raises on any response text or record.

    Example:
        >>> from reward_plugins.rescore.records import ScoredRow
        >>> row = ScoredRow("a.jsonl", 1, {"input": "q", "score": 1}, 3, "my_source",
        ...                 "<answer>Paris</answer>", {"score": 1.0, "calls": 2, "note": "x"})
        >>> stats = describe_row(row)
        >>> stats.values, stats.logged, stats.excerpt
        ((('score', 1.0), ('calls', 2.0)), 1.0, '<answer>Paris</answer>')
    """
    values = []
    for key, value in row.result.items():
        number = _number(value)
        if isinstance(key, str) and number is not None:
            values.append((key, number))
    return RowStats(
        file=row.file,
        number=row.number,
        step=row.step,
        data_source=row.data_source,
        group=group_key(row.record.get("input")),
        values=tuple(values),
        logged=_number(row.record.get("score")),
        excerpt=_tail(row.response),
        experiment=_experiment_of(row.record),
    )


def group_key(value: Any) -> str | None:
    """The GRPO group key of an ``input`` value: a 64-bit BLAKE2b hex digest of the string (of
    its sorted-key JSON when it is not a string), the same in every process; ``None`` for
    ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        try:
            data = json.dumps(value, sort_keys=True, default=str).encode("ascii")
        except (TypeError, ValueError):  # keys that do not sort, circular values
            data = repr(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def run_name(inputs: Iterable[str | Path]) -> str:
    """The run's name for the page title: per input, the last component of its absolute path
    that is not a format suffix, a step number (verl's ``{step}.jsonl``) or one of
    :data:`GENERIC_NAMES`, so ``checkpoints/search_r1/grpo_nq/rollouts`` is ``grpo_nq`` (verl's
    ``trainer.experiment_name`` in its default checkpoint layout); the names of several inputs
    joined by ``", "``, each once.

    Example:
        >>> run_name(["/runs/grpo_nq/rollouts", "/runs/grpo_nq/val/120.jsonl"])
        'grpo_nq'
    """
    names: dict[str, None] = {}
    for given in inputs:
        path = Path(given)
        absolute = path.absolute()
        name = None
        for index, part in enumerate(reversed(absolute.parts[1:])):
            stem = _FORMAT_SUFFIX.sub("", part) if index == 0 else part
            if not stem.isdigit() and stem.lower() not in GENERIC_NAMES:
                name = stem
                break
        names.setdefault(name or path.name or str(path), None)
    return ", ".join(names)


def _number(value: Any) -> float | None:
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isfinite(number):
            return number
    return None


def _tail(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else "…" + text[1 - EXCERPT_CHARS :]


def _experiment_of(record: Mapping[str, Any]) -> str | None:
    name = record.get("experiment_name")
    if not isinstance(name, str):
        info = record.get("extra_info")
        name = info.get("experiment_name") if isinstance(info, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    return name if len(name) <= EXCERPT_CHARS else name[: EXCERPT_CHARS - 1] + "…"


# ----------------------------------------------------------------------------- aggregation


class ReportError(RewardPluginsError):
    """The report cannot be made: a missing optional dependency or a bad option."""


class _Moments:
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


class _Counts:
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

    def merge(self, other: _Counts) -> None:
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


class _TopK:
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


class _Group:
    """A GRPO group of the current step: its size, the shared reward (``None`` once two rows
    differ or a row has none) and its first row."""

    __slots__ = ("first", "score", "size")

    def __init__(self, stats: RowStats) -> None:
        self.size = 1
        self.score = stats.score
        self.first = stats


class RateExamples(NamedTuple):
    """The example rows a rate indicator shows: the rows holding ``value`` (the rarer of 0
    and 1 over the run, 1 on a tie), the highest reward first; ``share`` is the share of the
    rows with the key that hold it."""

    value: float
    share: float
    rows: list[RowStats]


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
        self._schema_of = schema_of
        self._schemas: dict[str, Schema] = {}
        self._kinds: dict[str, dict[str, str]] = {}
        self._columns: dict[str, int] = {}
        self._files: set[str] = set()
        self._steps: dict[int | None, _Moments] = {}
        self._sources: dict[str, _Counts] = {}
        self._rates: dict[str, tuple[_TopK, _TopK]] = {}
        self._largest: dict[str, _TopK] = {}
        self._uniform = _TopK(examples)
        self._disagreeing = _TopK(examples)
        self._logged = self._agreeing = 0
        self._pairs: dict[tuple[float, float], int] | None = {}
        self._buckets: dict[tuple[int, int], int] = {}
        self._experiments: dict[str, None] = {}
        self._more_experiments = False
        self._open: Any = _NO_STEP
        self._block: list[tuple[tuple[tuple[str, float], ...], float | None]] = []
        self._block_sources: list[str] = []
        self._groups: dict[str, _Group] = {}
        self._closed: set[int | None] = set()
        self._reopened: set[int | None] = set()
        self._ungrouped = 0
        self._charts: dict[str, tuple[str, bytes]] | None = None

    # --------------------------------------------------------------------------- adding

    def add(self, stats: RowStats) -> None:
        """Fold one row into the aggregates (rows of one step are expected to be contiguous;
        see the module docstring for a step that comes back).

        Raises:
            ReportError: ``schema_of`` refused the row's data source (the message names it).
        """
        kinds = self._kinds_of(stats.data_source)
        if stats.step != self._open:
            self._switch(stats.step)
        self.rows += 1
        self._files.add(stats.file)
        agreement = None
        if stats.logged is not None and stats.score is not None:
            agreement = self._compare(stats.logged, stats.score, stats)
        self._keep_examples(stats, kinds)
        self._block.append((stats.values, agreement))
        self._block_sources.append(stats.data_source)
        if len(self._block) >= _BLOCK_ROWS:
            self._flush()
        if stats.group is not None:
            self._group(stats)
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
            if key not in self._columns:
                self._columns[key] = len(self._columns) + len(ENGINE_SERIES)
            kind = kinds.get(key, "diagnostic")
            if kind == "rate":
                self._rate_rows(key)[value != 0].offer(rank, stats)
            elif kind in ("count", "length"):
                largest = self._largest.get(key)
                if largest is None:
                    largest = self._largest[key] = _TopK(self.examples)
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

    def _rate_rows(self, key: str) -> tuple[_TopK, _TopK]:
        rows = self._rates.get(key)
        if rows is None:
            rows = self._rates[key] = (_TopK(self.examples), _TopK(self.examples))
        return rows

    def _compare(self, logged: float, score: float, stats: RowStats) -> float:
        self._logged += 1
        agree = math.isclose(logged, score, rel_tol=AGREEMENT_REL_TOL, abs_tol=1e-9)
        if agree:
            self._agreeing += 1
        else:
            self._disagreeing.offer(abs(logged - score), stats)
        if self._pairs is not None:
            pair = (logged, score)
            self._pairs[pair] = self._pairs.get(pair, 0) + 1
            if len(self._pairs) > 36:
                self._pairs = None
        bucket = (_sign(logged), _sign(score))
        self._buckets[bucket] = self._buckets.get(bucket, 0) + 1
        return 1.0 if agree else 0.0

    def _group(self, stats: RowStats) -> None:
        key = stats.group
        assert key is not None
        group = self._groups.get(key)
        if group is None:
            if len(self._groups) < MAX_OPEN_GROUPS:
                self._groups[key] = _Group(stats)
            else:
                self._ungrouped += 1
            return
        group.size += 1
        if group.score is not None and stats.score != group.score:
            group.score = None

    def _switch(self, step: int | None) -> None:
        self._finish_step()
        if step in self._closed:
            self._reopened.add(step)
        self._open = step
        if step not in self._steps:
            self._steps[step] = _Moments()

    def _flush(self) -> None:
        """Fold the buffered rows (all of the current step) into the aggregates."""
        if not self._block:
            return
        columns = self._columns
        values = np.full((len(self._block), len(columns) + len(ENGINE_SERIES)), np.nan)
        for row, (items, agreement) in enumerate(self._block):
            if agreement is not None:
                values[row, _ENGINE_COLUMNS[AGREEMENT]] = agreement
            for key, value in items:
                values[row, columns[key]] = value
        self._steps[self._open].add_block(values)
        sources = self._block_sources
        if len(set(sources)) == 1:
            self._source(sources[0]).add_block(values)
        else:
            for source in dict.fromkeys(sources):
                chosen = np.fromiter((s == source for s in sources), bool, len(sources))
                self._source(source).add_block(values[chosen])
        self._block, self._block_sources = [], []

    def _source(self, source: str) -> _Counts:
        counts = self._sources.get(source)
        if counts is None:
            counts = self._sources[source] = _Counts()
        return counts

    def _finish_step(self) -> None:
        """Flush the buffer and close the current step's groups into its one-reward rate."""
        self._flush()
        if self._open is _NO_STEP:
            return
        moments = self._steps[self._open]
        index = _ENGINE_COLUMNS[UNIFORM_REWARD]
        for group in self._groups.values():
            if group.size >= 2:
                value = 0.0 if group.score is None else 1.0
                moments.add_value(index, value)
                self._source(group.first.data_source).add_value(index, value)
                if group.score is not None:
                    self._uniform.offer(group.size, group.first)
        self._groups = {}
        self._closed.add(self._open)
        self._open = _NO_STEP

    # --------------------------------------------------------------------------- reading

    def schema(self) -> Schema:
        """The keys the report shows: every data source's declared keys that some row holds,
        in declaration order (the first declaration of a key wins), then the keys rows hold
        that no schema declares, as ``diagnostic``."""
        return complete(union(self._schemas.values()), self._columns)

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
        bands = {step: moments.band(index) for step, moments in self._steps.items()}
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
            kept = self._disagreeing
        elif indicator == UNIFORM_REWARD:
            kept = self._uniform
        elif indicator in self._rates:
            return self.rate_examples(indicator).rows
        elif indicator in self._largest:
            kept = self._largest[indicator]
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
        seen = self._overall().distribution(self._columns[key])
        total = sum(seen.values())
        fired = sum(count for value, count in seen.items() if value != 0)
        value = 1.0 if fired <= total - fired else 0.0
        share = (fired if value else total - fired) / total if total else math.nan
        return RateExamples(value, share, [stats for _, stats in rows[int(value)].best()])

    def _index(self, series: str) -> int:
        index = _ENGINE_COLUMNS.get(series, self._columns.get(series))
        if index is None:
            valid = ", ".join([*ENGINE_SERIES, *self._columns])
            raise ReportError(f"unknown series {series!r}; valid: {valid}")
        return index

    def _overall(self) -> _Counts:
        overall = _Counts()
        for counts in self._sources.values():
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
        page = self._page().encode("utf-8")
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
            self._charts = _render_charts(self._chart_plan())
        return self._charts

    def _chart_plan(self) -> list[_Chart]:
        """Every chart of the page, in page order: per-step curves of the reward and the
        components, then per indicator its curve (and its distribution for counts and
        lengths), then the engine's two series."""
        steps = sorted(step for step in self._steps if step is not None)
        if len(steps) < 2:
            steps = []
        overall = self._overall()
        plan: list[_Chart] = []
        names: set[str] = set()

        def curve(chart_id: str, name: str, label: str, kind: str, index: int) -> None:
            bands = [self._steps[step].band(index) for step in steps]
            if any(band.n for band in bands):
                plan.append(_Chart(chart_id, _unique(name, names), label, kind, steps, bands, {}))

        schema = self.schema()
        for item in schema:
            if item.kind in CURVE_KINDS:
                curve(f"step:{item.key}", item.key, item.label, item.kind, self._columns[item.key])
        for item in schema:
            if item.kind in INDICATOR_KINDS:
                index = self._columns[item.key]
                curve(f"step:{item.key}", item.key, item.label, item.kind, index)
                seen = overall.distribution(index)
                if item.kind != "rate" and seen:
                    name = _unique(f"{item.key}_distribution", names)
                    plan.append(
                        _Chart(f"dist:{item.key}", name, item.label, item.kind, [], [], seen)
                    )
        for series in ENGINE_SERIES:
            curve(
                f"step:@{series}", series, _ENGINE_LABELS[series], "rate", _ENGINE_COLUMNS[series]
            )
        return plan

    # ------------------------------------------------------------------------------ page

    def _page(self) -> str:
        charts = self._render()
        overall = self._overall()
        schema = self.schema()
        parts = [
            _HEAD.format(title=_e(self.full_title)),
            self._header(schema),
            self._steps_section(charts, schema),
            self._sources_section(overall, schema),
            self._agreement_section(charts),
            self._indicators_section(charts, overall, schema),
            "</body>\n</html>\n",
        ]
        return "".join(parts)

    def _header(self, schema: Schema) -> str:
        steps = [step for step in self._steps if step is not None]
        facts = [
            _counted(self.rows, "row"),
            _counted(len(steps), "step") if steps else "no step column",
            _counted(len(self._sources), "data source"),
            _counted(len(self._files), "file"),
        ]
        if self.scorer:
            facts.append(f"scorer <code>{_e(self.scorer)}</code>")
        facts.append(f"logged score on {self._logged:,} rows")
        notes = [
            "Charts and tables follow the scorer's result schema: the reward and its components "
            "per step; rates (on a 0 to 1 axis), counts and lengths as indicators; diagnostics "
            "in the data-source tables only.",
            "Bands on the curves and intervals in the per-step table: 95% normal approximation, "
            "mean ± 1.96·s/√n clipped to the values' range. Intervals in the data-source and "
            "indicator tables: 95% percentile bootstrap (1,000 resamples).",
        ]
        diagnostics = [item for item in schema if item.kind == "diagnostic"]
        if diagnostics:
            listed = ", ".join(f"<code>{_e(item.key)}</code>" for item in diagnostics)
            notes.append(f"Diagnostics (tabulated, not charted): {listed}.")
        if self._reopened:
            notes.append(
                f"Steps that came back after rows of other steps: {len(self._reopened):,}; their "
                "GRPO groups were formed separately in each run of rows."
            )
        if self._ungrouped:
            notes.append(
                f"{self._ungrouped:,} rows were left out of the GRPO groups (more than "
                f"{MAX_OPEN_GROUPS:,} distinct inputs in one step)."
            )
        return (
            f"<header><h1>{_e(self.full_title)}</h1>\n<p class='facts'>{' · '.join(facts)}</p>\n"
            + "".join(f"<p class='note'>{note}</p>\n" for note in notes)
            + "</header>\n"
        )

    def _charted(self, schema: Schema) -> list[tuple[str, str, int]]:
        """``(key, label, column)`` of every charted series, in page order."""
        keys = [item for item in schema if item.kind in CURVE_KINDS]
        keys += [item for item in schema if item.kind in INDICATOR_KINDS]
        return [(item.key, item.label, self._columns[item.key]) for item in keys] + [
            (series, _ENGINE_LABELS[series], _ENGINE_COLUMNS[series]) for series in ENGINE_SERIES
        ]

    def _steps_section(self, charts: Mapping[str, tuple[str, bytes]], schema: Schema) -> str:
        out = ["<section id='steps'><h2>Per step</h2>\n"]
        shown = [
            (f"step:{item.key}", item.label)
            for item in schema
            if item.kind in CURVE_KINDS and f"step:{item.key}" in charts
        ]
        if shown:
            out.append(_figures(charts, shown))
        elif len([step for step in self._steps if step is not None]) < 2:
            out.append("<p>Fewer than two steps: no curves; the table holds the values.</p>\n")
        present = [
            (label, index)
            for _, label, index in self._charted(schema)
            if any(index < m.n.size and m.n[index] for m in self._steps.values())
        ]
        out.append(f"<details{'' if shown else ' open'}><summary>Per-step table</summary>\n")
        out.append("<div class='wide'><table>\n<tr><th>step</th><th>rows</th>")
        out.extend(f"<th>{_e(label)}</th>" for label, _ in present)
        out.append("</tr>\n")
        for step in sorted(self._steps, key=lambda s: (s is None, s or 0)):
            moments = self._steps[step]
            out.append(f"<tr><td>{'(none)' if step is None else step}</td><td>{moments.rows}</td>")
            out.extend(f"<td>{_interval(moments.band(index))}</td>" for _, index in present)
            out.append("</tr>\n")
        out.append("</table></div></details>\n</section>\n")
        return "".join(out)

    def _sources_section(self, overall: _Counts, schema: Schema) -> str:
        out = ["<section id='sources'><h2>Per data source</h2>\n"]
        tables = [(source, self._sources[source]) for source in sorted(self._sources)]
        if len(tables) > 1:
            tables.append(("all data sources", overall))
        series = [(item.label, item.kind, self._columns[item.key]) for item in schema]
        series += [(_ENGINE_LABELS[s], "rate", _ENGINE_COLUMNS[s]) for s in ENGINE_SERIES]
        for name, counts in tables:
            out.append(f"<h3>{_e(name)}</h3>\n<p>{counts.rows:,} rows</p>\n<table>\n")
            out.append(
                "<tr><th>series</th><th>kind</th><th>n</th><th>mean</th><th>95% CI</th></tr>\n"
            )
            for label, kind, index in series:
                interval = counts.interval(index)
                if interval.n:
                    out.append(
                        f"<tr><td>{_e(label)}</td><td>{kind}</td><td>{interval.n:,}</td>"
                        f"<td>{_fmt(interval.mean)}</td>"
                        f"<td>{_fmt(interval.low)} &ndash; {_fmt(interval.high)}</td></tr>\n"
                    )
            out.append("</table>\n")
        return "".join(out) + "</section>\n"

    def _agreement_section(self, charts: Mapping[str, tuple[str, bytes]]) -> str:
        out = ["<section id='agreement'><h2>Logged vs re-scored</h2>\n"]
        if not self._logged:
            out.append(
                "<p>No row has both a numeric logged <code>score</code> and a re-scored one.</p>\n"
            )
            return "".join(out) + "</section>\n"
        rate = self._agreeing / self._logged
        out.append(
            f"<p>Agreement: <strong>{rate:.1%}</strong> ({self._agreeing:,} of {self._logged:,} "
            "rows with a numeric logged <code>score</code>); equal means within a relative "
            f"tolerance of {AGREEMENT_REL_TOL:g}.</p>\n"
        )
        out.append(self._confusion())
        if f"step:@{AGREEMENT}" in charts:
            out.append(_figures(charts, [(f"step:@{AGREEMENT}", _ENGINE_LABELS[AGREEMENT])]))
        rows = self._disagreeing.best()
        if rows:
            out.append("<h3>Disagreeing rows (largest difference first)</h3>\n<table>\n")
            out.append(
                "<tr><th>row</th><th>step</th><th>data source</th><th>logged</th>"
                "<th>re-scored</th><th>response (end)</th></tr>\n"
            )
            for _, stats in rows:
                out.append(
                    f"<tr>{_where(stats)}<td>{_g(stats.logged)}</td><td>{_g(stats.score)}</td>"
                    f"{_response_cell(stats)}</tr>\n"
                )
            out.append("</table>\n")
        return "".join(out) + "</section>\n"

    def _confusion(self) -> str:
        """Rows: logged; columns: re-scored; exact values when each side has at most 6."""
        pairs = self._pairs
        labels: dict[Any, str]
        if pairs is not None and max(len({p[0] for p in pairs}), len({p[1] for p in pairs})) <= 6:
            cells: Mapping[Any, int] = pairs
            logged = sorted({pair[0] for pair in pairs})
            scored = sorted({pair[1] for pair in pairs})
            labels = {value: _g(value) for value in {*logged, *scored}}
            caption = "exact values"
        else:
            cells = self._buckets
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

    def _indicators_section(
        self, charts: Mapping[str, tuple[str, bytes]], overall: _Counts, schema: Schema
    ) -> str:
        indicators = [item for item in schema if item.kind in INDICATOR_KINDS]
        out = [
            "<section id='indicators'><h2>Indicators</h2>\n",
            "<p>The scorer's rates, counts and lengths, and the GRPO groups whose rows all got "
            "one reward (GRPO learns nothing from them: every advantage is 0).</p>\n<table>\n",
            "<tr><th>indicator</th><th>key</th><th>kind</th><th>n</th><th>mean</th>"
            "<th>95% CI</th><th>max</th></tr>\n",
        ]
        rows = [(item.label, item.key, item.kind, self._columns[item.key]) for item in indicators]
        rows.append((_ENGINE_LABELS[UNIFORM_REWARD], UNIFORM_REWARD, "rate", 1))
        for label, key, kind, index in rows:
            interval = overall.interval(index)
            seen = overall.distribution(index)
            out.append(
                f"<tr><td><a href='#{_e(_anchor(key))}'>{_e(label)}</a></td>"
                f"<td><code>{_e(key)}</code></td><td>{kind}</td><td>{interval.n:,}</td>"
                f"<td>{_fmt(interval.mean)}</td>"
                f"<td>{_fmt(interval.low)} &ndash; {_fmt(interval.high)}</td>"
                f"<td>{_g(max(seen)) if seen else '&ndash;'}</td></tr>\n"
            )
        out.append("</table>\n")
        for item in indicators:
            out.append(f"<h3 id='{_e(_anchor(item.key))}'>{_e(item.label)}</h3>\n")
            shown = [(f"step:{item.key}", item.label), (f"dist:{item.key}", item.label)]
            shown = [(chart, label) for chart, label in shown if chart in charts]
            if shown:
                out.append(_figures(charts, shown))
            if item.kind == "rate":
                out.append(self._rate_table(item))
            else:
                out.append(self._largest_table(item))
        out.append(f"<h3 id='{_anchor(UNIFORM_REWARD)}'>{_ENGINE_LABELS[UNIFORM_REWARD]}</h3>\n")
        out.append(
            "<p>Among the GRPO groups of a step (its rows with an identical <code>input</code>) "
            "that hold 2 rows or more, the share whose rows all have the same re-scored "
            "<code>score</code>.</p>\n"
        )
        if f"step:@{UNIFORM_REWARD}" in charts:
            out.append(
                _figures(charts, [(f"step:@{UNIFORM_REWARD}", _ENGINE_LABELS[UNIFORM_REWARD])])
            )
        groups = self._uniform.best()
        if not groups:
            out.append("<p>No group of 2 rows or more got one reward.</p>\n")
        else:
            out.append(_table_head("largest group first; its first row", "rows in group"))
            for size, stats in groups:
                out.append(_example_row(stats, size))
            out.append("</table>\n")
        return "".join(out) + "</section>\n"

    def _rate_table(self, item: ResultKey) -> str:
        examples = self.rate_examples(item.key)
        value = _g(examples.value)
        if not examples.rows:
            return f"<p>No row has {_e(item.label)} = {value}.</p>\n"
        rarer = "rarer value" if examples.share < 0.5 else "value as frequent as the other"
        caption = (
            f"rows where {item.label} = {value} (the {rarer}: {examples.share:.1%} of the rows "
            "with the key), highest reward first"
        )
        out = [_table_head(caption, item.label)]
        out.extend(_example_row(stats, examples.value) for stats in examples.rows)
        return "".join(out) + "</table>\n"

    def _largest_table(self, item: ResultKey) -> str:
        kept = self._largest.get(item.key)
        rows = kept.best() if kept is not None else []
        if not rows:
            return "<p>No example rows.</p>\n"
        out = [_table_head(f"largest {item.label} first", item.label)]
        out.extend(_example_row(stats, value) for value, stats in rows)
        return "".join(out) + "</table>\n"


# ---------------------------------------------------------------------------------- charts


class _Chart(NamedTuple):
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


_COLORS = {"reward": "#1f77b4", "component": "#1f77b4", "rate": "#c0392b"}


def _render_charts(plan: Sequence[_Chart]) -> dict[str, tuple[str, bytes]]:
    """Each chart of ``plan`` as a PNG (its title the label, its y-axis range in its
    ``Description`` text chunk, e.g. ``y from 0 to 1``)."""
    require_plotting()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    charts: dict[str, tuple[str, bytes]] = {}
    for chart in plan:
        figure = Figure(figsize=(6.4, 3.2), dpi=100)
        FigureCanvasAgg(figure)  # Agg explicitly: no GUI backend, no pyplot state
        figure.subplots_adjust(left=0.1, right=0.97, top=0.9, bottom=0.15)
        axes = figure.add_subplot()
        color = _COLORS.get(chart.kind, "#8e44ad")
        if chart.counts:
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
        else:
            x = np.array(chart.steps, dtype=float)
            mean, low, high = (np.array([band[i] for band in chart.bands]) for i in range(3))
            axes.fill_between(x, low, high, color=color, alpha=0.25, linewidth=0)
            axes.plot(
                x, mean, color=color, linewidth=1.5, marker="o" if len(x) <= 60 else "",
                clip_on=False,
            )  # fmt: skip
            limits = value_axis(chart.kind, float(np.nanmin(low)), float(np.nanmax(high)))
            if limits is not None:
                axes.set_ylim(*limits)
            axes.set_title(chart.label)
            axes.set_xlabel("step")
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
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


# ------------------------------------------------------------------------------------ HTML

_HEAD = """<!DOCTYPE html>
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


def _figures(charts: Mapping[str, tuple[str, bytes]], shown: Iterable[tuple[str, str]]) -> str:
    """A ``<figure>`` per ``(chart id, alt text)`` of ``shown``, its PNG from ``charts``
    embedded as a base64 data URI (the PNG holds its own title)."""
    figures = "".join(
        f"<figure><img class='chart' alt='{_e(caption)}' src='data:image/png;base64,"
        f"{base64.b64encode(charts[chart][1]).decode('ascii')}'></figure>\n"
        for chart, caption in shown
    )
    return f"<div class='charts'>\n{figures}</div>\n"


def _table_head(caption: str, value_label: str) -> str:
    return (
        f"<table>\n<caption>{_e(caption)}</caption>\n<tr><th>row</th><th>step</th>"
        f"<th>data source</th><th>{_e(value_label)}</th><th>reward</th>"
        "<th>response (end)</th></tr>\n"
    )


def _example_row(stats: RowStats, value: float) -> str:
    return f"<tr>{_where(stats)}<td>{_g(value)}</td><td>{_g(stats.score)}</td>" + (
        f"{_response_cell(stats)}</tr>\n"
    )


def _anchor(key: str) -> str:
    return "indicator-" + re.sub(r"[^A-Za-z0-9_-]", "_", key)


def _e(text: str) -> str:
    """``text`` as HTML, a lone surrogate (from a JSON escape) shown as its escape."""
    return html.escape(printable(text), quote=True)


def _fmt(value: float) -> str:
    return "&ndash;" if math.isnan(value) else f"{value:,.3f}"


def _g(value: float | None) -> str:
    return "&ndash;" if value is None else f"{value:.6g}"


def _interval(interval: MeanCI) -> str:
    if not interval.n:
        return "&ndash;"
    return (
        f"{_fmt(interval.mean)} <span class='muted'>"
        f"({_fmt(interval.low)}&ndash;{_fmt(interval.high)})</span>"
    )


def _where(stats: RowStats) -> str:
    step = "(none)" if stats.step is None else str(stats.step)
    return (
        f"<td>{_e(stats.file)}:{stats.number}</td><td>{step}</td><td>{_e(stats.data_source)}</td>"
    )


def _response_cell(stats: RowStats) -> str:
    return f"<td class='response'>{_e(stats.excerpt) or '<span class=muted>(empty)</span>'}</td>"


def _counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)
