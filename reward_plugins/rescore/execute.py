"""The job: read inputs in chunks, score each chunk in a worker, write and summarize in order.

The parent process only reads raw chunks (through each input's format, see
:mod:`reward_plugins.rescore.formats`), hands them to workers (itself with one worker, a process
pool, or Ray tasks: :mod:`.workers`), and writes what comes back in input order
(:mod:`.output`), after :mod:`.plan` has checked every path, option and column. Chunk
boundaries depend only on the input, so the output is byte-identical for every backend and
worker count.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from reward_plugins.rescore import datasets, summary
from reward_plugins.rescore.background import in_background
from reward_plugins.rescore.errors import BadRowError, DataError, RescoreError
from reward_plugins.rescore.formats import read_chunks
from reward_plugins.rescore.job import ScoreJob
from reward_plugins.rescore.output import Failures, Progress, Stats, Writer
from reward_plugins.rescore.plan import Plan, check_outputs, find_columns, output_schema, plan
from reward_plugins.rescore.workers import WorkerJob, executor, usable_cpus
from reward_plugins.runtime import rows
from reward_plugins.runtime.scoring import takes_extra_info

__all__ = ["BadRowError", "Progress", "RescoreError", "ScoreJob", "run", "usable_cpus"]


def run(
    job: ScoreJob,
    progress: Progress | None = None,
    on_described: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run ``job``: read, score, write the outputs (if any), and return the summary.

    Raises:
        RescoreError: bad arguments or paths, a missing optional dependency (before any work).
        BadRowError: with ``on_error="fail"``, the first row that cannot be scored; its output
            file is not written (earlier files of a run are complete and in the manifest).
    """
    the_plan = plan(job)
    started = time.perf_counter()
    todo = the_plan.todo
    columns = find_columns(job, the_plan) if todo else None
    check_outputs(the_plan)
    sources = None
    if todo and job.datasets:
        try:
            sources = datasets.load(job.datasets)
        except datasets.DatasetError as error:
            raise RescoreError(str(error)) from None
    worker_job = WorkerJob(
        job.scorer,
        dict(job.options),
        columns or rows.Columns("", "", None),
        job.data_source,
        tuple(str(path) for path in the_plan.inputs),
        tuple(the_plan.formats),
        tuple(the_plan.output_formats),
        output_schema(the_plan),
        job.describe,
        takes_extra_info(job.scorer),
        sources,
    )
    stats = Stats()
    with contextlib.ExitStack() as stack:
        failures = Failures(the_plan.failures_path, stack)
        run_chunks = stack.enter_context(executor(job, worker_job))
        # Closed on any exit, so that the reading thread stops with the job.
        chunks = stack.enter_context(
            contextlib.closing(
                in_background(
                    chunk
                    for index in todo
                    for chunk in read_chunks(the_plan.inputs[index], index, the_plan.formats[index])
                )
            )
        )
        writer = Writer(the_plan, job.on_error, job.merge, stats, failures)
        try:
            writer.write_all(run_chunks(chunks), progress, on_described)
        except DataError as error:  # from Ray, wrapped: the worker's own error is its cause
            raise BadRowError(str(getattr(error, "cause", None) or error)) from None
        failures.finish()
    seconds = time.perf_counter() - started
    finished = time.perf_counter()
    schema = summary.schema_of(job.scorer, job.options, summary.sources(stats.counts))
    groups = summary.finish(stats.counts, schema)
    stats.seconds["summary"] = time.perf_counter() - finished
    return _summary(job, the_plan, columns, stats, groups, seconds, sources)


def _summary(
    job: ScoreJob,
    the_plan: Plan,
    columns: rows.Columns | None,
    stats: Stats,
    groups: dict[str, Any],
    seconds: float,
    sources: datasets.PromptIndex | None,
) -> dict[str, Any]:
    """The job's summary: what was read and written, the counts, ``groups`` (the metrics per
    data source and step) and the time taken."""
    scored_now = set(the_plan.todo)
    resumed = [str(path) for i, path in enumerate(the_plan.inputs) if i not in scored_now]
    return {
        "input": ", ".join(map(str, job.inputs)),
        "files": len(the_plan.inputs),
        "resumed_files": resumed,
        "changed_outputs": [str(the_plan.targets[i]) for i in the_plan.changed],
        "output": None if job.output is None else str(job.output),
        "failures_file": str(the_plan.failures_path)
        if stats.reasons and the_plan.failures_path
        else None,
        "scorer": job.scorer,
        "options": dict(job.options),
        "backend": job.backend,
        "workers": job.workers,
        "columns": {
            "response": columns.response if columns else None,
            "ground_truth": columns.ground_truth if columns else None,
            "data_source": columns.data_source if columns else None,
        },
        "data_source_option": job.data_source,
        "datasets": None
        if sources is None
        else {
            "files": list(sources.files),
            "rows": sources.total_rows,
            "data_sources": list(sources.sources),
        },
        "rows": stats.rows,
        "scored": stats.scored,
        "stringified_ground_truths": stats.stringified,
        "replaced_columns": sorted(stats.replaced),
        "skipped": {
            "rows": stats.rows - stats.scored,
            "reasons": dict(stats.reasons.most_common()),
            "examples": stats.examples,
        },
        **groups,
        "seconds": {"total": seconds + stats.seconds["summary"], **stats.seconds},
    }
