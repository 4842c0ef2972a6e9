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

- :func:`describe_row` (:mod:`.rows`) runs in the worker processes on every
  :class:`~reward_plugins.rescore.records.ScoredRow` and returns a compact, picklable
  :class:`RowStats`: the result's numeric values, the logged score, the GRPO group key and the
  response's end (shown as text, never scored).
- :class:`RunReport` (:mod:`.run`) runs in the parent process: :meth:`RunReport.add` folds each
  row into the accumulators of :mod:`.aggregate`, whose size does not grow with the number of
  rows, and :meth:`RunReport.write_html` / :meth:`RunReport.write_pngs` render them: the page
  in :mod:`.page` (its pieces in :mod:`.markup`), the charts in :mod:`.charts`. It reads each
  data source's schema once, through ``schema_of`` (the CLI passes
  :func:`reward_plugins.router.result_schema`).
  :mod:`.series` holds the kinds charted, the engine's two series and the report's limits.

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

from reward_plugins.rescore.errors import ReportError
from reward_plugins.rescore.report.aggregate import RateExamples
from reward_plugins.rescore.report.charts import require_plotting, value_axis
from reward_plugins.rescore.report.rows import (
    EXCERPT_CHARS,
    GENERIC_NAMES,
    RowStats,
    describe_row,
    group_key,
    run_name,
)
from reward_plugins.rescore.report.run import RunReport, SchemaOf
from reward_plugins.rescore.report.series import (
    AGREEMENT,
    AGREEMENT_REL_TOL,
    CURVE_KINDS,
    DEFAULT_EXAMPLES,
    ENGINE_LABELS,
    ENGINE_SERIES,
    INDICATOR_KINDS,
    MAX_EXPERIMENTS,
    MAX_OPEN_GROUPS,
    UNIFORM_REWARD,
)

__all__ = [
    "AGREEMENT",
    "AGREEMENT_REL_TOL",
    "CURVE_KINDS",
    "DEFAULT_EXAMPLES",
    "ENGINE_LABELS",
    "ENGINE_SERIES",
    "EXCERPT_CHARS",
    "GENERIC_NAMES",
    "INDICATOR_KINDS",
    "MAX_EXPERIMENTS",
    "MAX_OPEN_GROUPS",
    "UNIFORM_REWARD",
    "RateExamples",
    "ReportError",
    "RowStats",
    "RunReport",
    "SchemaOf",
    "describe_row",
    "group_key",
    "require_plotting",
    "run_name",
    "value_axis",
]
