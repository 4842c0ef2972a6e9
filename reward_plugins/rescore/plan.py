"""Planning a job: every path, option, column and output checked before any row is scored.

:func:`plan` resolves the inputs and the outputs (each with its format), removes what a killed
run left behind, and with ``--resume`` decides which inputs to score again from the output
directory's manifest; :func:`find_columns`, :func:`check_outputs` and :func:`output_schema`
then look at the inputs' first rows, their columns and (for a parquet output of several inputs
or of JSON lines) all their rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reward_plugins.errors import RewardPluginsError
from reward_plugins.rescore import datasets, files
from reward_plugins.rescore.errors import RescoreError
from reward_plugins.rescore.formats import Format, rows_of
from reward_plugins.rescore.job import ScoreJob
from reward_plugins.router import check_options
from reward_plugins.runtime import rows

COLUMN_SAMPLE_ROWS = 1000
"""The columns a job reads are chosen from this many rows at the start of its inputs."""


@dataclass
class Plan:
    """What a job reads and writes: each input with its format, output file and its format."""

    inputs: list[Path]
    formats: list[Format]
    targets: list[Path | None]
    output_formats: list[Format | None]
    todo: list[int]  # indices of the inputs to score (others: complete, with --resume)
    changed: list[int]  # with --resume: inputs whose output changed after it was written
    manifest: files.Manifest | None
    failures_path: Path | None


def plan(job: ScoreJob) -> Plan:
    """Check every path and option before any work.

    Raises:
        RescoreError: a path, option or scorer that cannot be used as asked.
    """
    try:
        inputs, is_run = files.resolve_inputs(job.inputs)
        formats = [files.file_format(path) for path in inputs]
        failures_path = None if job.output is None else Path(f"{job.output}.failures.jsonl")
        others = [*job.also_writes, *([failures_path] if failures_path else [])]
        targets = files.plan_outputs(inputs, is_run, job.output, job.merge, others)
        output_formats = [None if t is None else files.file_format(t, "output") for t in targets]
    except files.PathError as error:
        raise RescoreError(str(error)) from None
    for fmt in dict.fromkeys([*formats, *output_formats]):
        if fmt is not None:
            fmt.require()
    directory_output = job.output is not None and is_run and not job.merge
    if job.resume and not directory_output:
        raise RescoreError("--resume needs a run (a directory of inputs) and a directory OUTPUT")
    _check_options(job)
    _prepare_outputs(job, directory_output, [*targets, *others])
    the_plan = Plan(inputs, formats, targets, output_formats, [], [], None, failures_path)
    the_plan.todo = list(range(len(inputs)))
    if directory_output:
        assert job.output is not None
        the_plan.manifest = files.Manifest.load(job.output, settings(job))
        if job.resume:
            _resume(the_plan)
    return the_plan


def _check_options(job: ScoreJob) -> None:
    """Refuse the scorer's options and the number of workers when they cannot be used."""
    try:
        check_options(job.scorer, job.data_source, job.options)
    except RewardPluginsError as error:
        raise RescoreError(
            f"--set: {error}" if not isinstance(error, LookupError) else str(error)
        ) from None
    if job.datasets and (job.data_source is not None or job.data_source_column is not None):
        raise RescoreError("give --dataset or --data-source/--data-source-column, not both")
    try:
        datasets.check(job.datasets)
    except datasets.DatasetError as error:
        raise RescoreError(str(error)) from None
    if job.workers is not None and job.workers < 1:
        raise RescoreError(f"--workers must be at least 1, got {job.workers}")


def _prepare_outputs(job: ScoreJob, directory_output: bool, written: list[Path | None]) -> None:
    """Make sure the outputs can be written, and remove the temporary files that a killed run
    left beside any file the job writes (the manifest of a directory output too)."""
    try:
        if job.output is not None:
            directory = job.output if directory_output else job.output.parent
            files.check_writable_directory(directory, f"output {job.output}")
        if directory_output:
            written.append(job.output / files.MANIFEST_NAME)  # type: ignore[operator]
        for target in {t for t in written if t is not None}:
            files.remove_stale_temporaries(target)
    except files.PathError as error:
        raise RescoreError(str(error)) from None


def _resume(the_plan: Plan) -> None:
    """With ``--resume``: score only the inputs whose output is not complete and intact."""
    assert the_plan.manifest is not None
    todo = the_plan.todo
    states = {
        i: _resumed(the_plan.manifest, the_plan.inputs[i], the_plan.formats[i], the_plan.targets[i])
        for i in todo
    }
    the_plan.changed = [i for i in todo if states[i] == "changed"]
    the_plan.todo = [i for i in todo if states[i] != "kept"]


def _resumed(
    manifest: files.Manifest, source: Path, fmt: Format, target: Path | None
) -> Literal["kept", "changed", "todo"]:
    """What ``--resume`` does with an output: keep it (listed, its input unchanged, and itself as
    it was written), score it again because it ``changed`` after it was written (truncated,
    edited), or score it (not listed, listed by a version that did not record the output's
    fingerprint, or its input changed)."""
    entry = None if target is None else manifest.listed(source, target)
    if entry is None or "output_crc32" not in entry:
        return "todo"
    if entry.get("sha256") != fmt.fingerprint(source):
        return "todo"
    assert target is not None
    return "kept" if manifest.intact(target, entry) else "changed"


def settings(job: ScoreJob) -> dict[str, Any]:
    """What an output depends on besides its input (a manifest is valid only for these)."""
    return {
        "scorer": job.scorer,
        "options": dict(job.options),
        "data_source": job.data_source,
        "data_source_column": job.data_source_column,
        "response_column": job.response_column,
        "ground_truth_column": job.ground_truth_column,
        "on_error": job.on_error,
        **(
            {"datasets": [files.file_digest(path) for path in job.datasets]} if job.datasets else {}
        ),
    }


# ------------------------------------------------------------------- columns and outputs


def _rows_to_score(the_plan: Plan) -> Iterator[dict[str, Any] | rows.RowFailure]:
    """The rows of the inputs to score, parsed, in order (lazily: for a look at the first)."""
    for index in the_plan.todo:
        for _, parsed in rows_of(the_plan.inputs[index], the_plan.formats[index]):
            yield parsed


def find_columns(job: ScoreJob, the_plan: Plan) -> rows.Columns:
    """The response, ground-truth and data-source columns, found in the first rows to score.

    Raises:
        RescoreError: a column is found in none of those rows.
    """
    first = itertools.islice(_rows_to_score(the_plan), COLUMN_SAMPLE_ROWS)
    records = [record for record in first if isinstance(record, dict)]
    if not records:  # no row to score, or none that parses: each row will say why
        return rows.Columns(
            job.response_column or rows.RESPONSE_COLUMNS[0],
            job.ground_truth_column or rows.GROUND_TRUTH_COLUMNS[0],
            None
            if job.data_source or job.datasets
            else job.data_source_column or rows.DATA_SOURCE_COLUMN,
        )
    where = f"input {the_plan.inputs[the_plan.todo[0]]}"
    try:
        response = rows.find_column(
            records,
            job.response_column,
            rows.RESPONSE_COLUMNS,
            "response",
            "--response-column",
            where,
        )
        truth = rows.find_column(
            records,
            job.ground_truth_column,
            rows.GROUND_TRUTH_COLUMNS,
            "ground truth",
            "--ground-truth-column",
            where,
        )
        source = None
        if job.data_source is None and not job.datasets:
            given = job.data_source_column
            source = rows.find_column(
                records,
                given,
                (rows.DATA_SOURCE_COLUMN,),
                "data source",
                "--data-source or --data-source-column",
                where,
            )
    except ValueError as error:
        raise RescoreError(str(error)) from None
    return rows.Columns(response, truth, source)


def check_outputs(the_plan: Plan) -> None:
    """Refuse, before any work, an input that its output's format cannot hold exactly.

    Raises:
        RescoreError: naming the input and the column.
    """
    for index, output_format in enumerate(the_plan.output_formats):
        if output_format is not None:
            output_format.check_input(the_plan.inputs[index], the_plan.formats[index])


def output_schema(the_plan: Plan) -> Any:
    """What the chunks of an output need to agree on (:meth:`Format.output_schema`): for the
    one output of several inputs (``--merge``) or of another format (a run's own outputs mirror
    its inputs); ``None`` when no output needs it.

    Raises:
        BadRowError: rows that cannot form one output.
    """
    by_target: dict[Path, list[int]] = {}
    for index in the_plan.todo:
        target = the_plan.targets[index]
        if target is not None:
            by_target.setdefault(target, []).append(index)
    for feeders in by_target.values():
        output_format = the_plan.output_formats[feeders[0]]
        assert output_format is not None
        inputs = [(the_plan.inputs[i], the_plan.formats[i]) for i in feeders]
        schema = output_format.output_schema(inputs)
        if schema is not None:
            return schema
    return None
