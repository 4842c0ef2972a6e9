"""Re-score rollout dumps and datasets: the engine behind ``reward-plugins score``.

A job reads a ``.jsonl`` or ``.parquet`` file, finds the response, ground-truth and data-source
columns, scores every row with a router scorer (in this process, over worker processes, or on Ray
Data), and writes every input column unchanged plus one ``reward_<key>`` column per result key,
rows in input order, through a temporary file renamed at the end. It returns a summary: per data
source and overall, the mean of each QA metric with its 95% bootstrap interval.

Nothing here prints; progress is reported through a callback.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import multiprocessing
import os
import pickle
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, NamedTuple, cast

from reward_plugins.errors import (
    InvalidGroundTruth,
    RewardPluginsError,
    UnknownDataSource,
    UnknownScorer,
)
from reward_plugins.metrics.aggregate import bootstrap_mean
from reward_plugins.registry import lookup, registrations_named
from reward_plugins.router import VERL_CALL_KEYWORDS, check_options, route

RESPONSE_COLUMNS: tuple[str, ...] = ("output", "response", "responses", "solution_str")
"""Response columns looked for, in this order (verl dumps call it ``output``)."""

GROUND_TRUTH_COLUMNS: tuple[str, ...] = ("gts", "ground_truth", "reward_model.ground_truth")
"""Ground-truth columns looked for, in this order; a dotted name is a field of a mapping column."""

DATA_SOURCE_COLUMN = "data_source"
RESULT_PREFIX = "reward_"
FORMATS: tuple[str, ...] = (".jsonl", ".parquet")

SUMMARY_METRICS: tuple[tuple[str, str], ...] = (
    ("score", "score"),
    ("em", "EM"),
    ("subem", "SubEM"),
    ("f1", "F1"),
    ("answer_found", "answer rate"),
    ("spam_penalized", "spam-penalized rate"),
)
"""``(result key, label)`` of the summary's means, each reported where the scorer computes it."""

RAY_INSTALL_HINT = 'pip install "reward-plugins[ray]"'
PARQUET_INSTALL_HINT = 'pip install "reward-plugins[parquet]"'

Progress = Callable[[int], None]
"""Called with the number of rows just scored."""


class RescoreError(Exception):
    """A job that cannot run as asked: bad arguments, unreadable input, a missing dependency."""


class BadRowError(RescoreError):
    """Rows that cannot be scored, with ``on_error="fail"``; the message names the first one."""


class RowFailure(NamedTuple):
    """Why one row was not scored: a short ``reason`` (the category) and a ``detail``."""

    reason: str
    detail: str


@dataclass(frozen=True)
class ScoreJob:
    """What ``reward-plugins score`` was asked to do.

    ``output`` may be ``None`` (score and summarize only). ``workers`` is the number of local
    processes, or the CPUs of a local Ray instance (``None``: 1 locally, every CPU on Ray).
    ``ray_logs=False`` silences Ray Data's progress messages.
    """

    input: Path
    output: Path | None
    scorer: str = "compute_score"
    options: Mapping[str, Any] = field(default_factory=dict)
    data_source: str | None = None
    response_column: str | None = None
    ground_truth_column: str | None = None
    on_error: Literal["fail", "skip"] = "fail"
    workers: int | None = None
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    ray_logs: bool = True


# ---------------------------------------------------------------------------------------- input


@dataclass
class InputRows:
    """The rows of an input file, kept as read so that they can be written back unchanged."""

    path: Path
    unit: str  # "line" (JSONL) or "row" (parquet), as error messages name positions
    numbers: list[int]  # 1-based line or row number of each row
    records: list[dict[str, Any]] | None = None  # JSONL rows
    table: Any = None  # pyarrow.Table of parquet rows
    failures: dict[int, RowFailure] = field(default_factory=dict)  # by row index, at read time
    _values: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.numbers)

    @cached_property
    def column_names(self) -> list[str]:
        """Top-level column names; for JSONL, every key of any row, in order of appearance."""
        if self.table is not None:
            return list(self.table.column_names)
        names: dict[str, None] = {}
        for record in self.records or ():
            names.update(dict.fromkeys(record))
        return list(names)

    def values(self, name: str) -> list[Any]:
        """The values of a top-level column, ``None`` where a row lacks it."""
        if name not in self._values:
            if self.table is not None:
                self._values[name] = self.table.column(name).to_pylist()
            else:
                self._values[name] = [record.get(name) for record in self.records or ()]
        return self._values[name]

    def string_array(self, name: str) -> Any:
        """A parquet top-level string column as one pyarrow array, else ``None``."""
        if self.table is None or name not in self.table.column_names:
            return None
        column = self.table.column(name)
        if str(column.type) not in ("string", "large_string"):
            return None
        return column.combine_chunks()


def _require_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as error:
        raise RescoreError(
            f"reading and writing parquet needs pyarrow: {PARQUET_INSTALL_HINT}"
        ) from error
    return pyarrow


def _check_format(path: Path, role: str) -> None:
    if path.suffix not in FORMATS:
        raise RescoreError(
            f"{role} {path}: unsupported format {path.suffix or '(no extension)'!r}; "
            f"use {' or '.join(FORMATS)}"
        )
    if path.suffix == ".parquet":
        _require_pyarrow()


def read_rows(path: Path) -> InputRows:
    """Read a JSONL or parquet file. Blank JSONL lines are ignored (they are not rows).

    A JSONL line that does not parse, or is not a JSON object, becomes a row with a read-time
    failure (an empty record), so that it is reported with its line number.
    """
    if not path.is_file():
        raise RescoreError(f"input {path}: no such file")
    if path.suffix == ".parquet":
        pyarrow = _require_pyarrow()
        try:
            table = pyarrow.parquet.read_table(path)
        except (OSError, pyarrow.ArrowException) as error:
            raise RescoreError(f"input {path}: not a readable parquet file: {error}") from error
        return InputRows(path, "row", list(range(1, table.num_rows + 1)), table=table)
    rows = InputRows(path, "line", [], records=[])
    assert rows.records is not None
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            failure = None
            try:
                record = json.loads(line)
            except ValueError as error:  # JSONDecodeError, or UnicodeDecodeError
                failure = RowFailure("unparsable JSON", f"unparsable JSON: {error}")
            else:
                if not isinstance(record, dict):
                    failure = RowFailure(
                        "unparsable JSON",
                        f"a row must be a JSON object, got {type(record).__name__}",
                    )
            if failure is not None:
                rows.failures[len(rows.numbers)] = failure
                record = {}
            rows.records.append(record)
            rows.numbers.append(number)
    return rows


# -------------------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class Columns:
    """The input columns a job reads; ``data_source`` is ``None`` when ``--data-source`` is used."""

    response: str
    ground_truth: str
    data_source: str | None


def _column_values(rows: InputRows, name: str) -> list[Any] | None:
    """The values of ``name`` (``parent.child`` reads a field of a mapping column), or ``None``
    when no row has it."""
    names = rows.column_names
    if name in names:
        return rows.values(name)
    parent, dot, child = name.partition(".")
    if not dot or parent not in names:
        return None
    parents = rows.values(parent)
    if not any(isinstance(value, Mapping) and child in value for value in parents):
        return None
    return [value.get(child) if isinstance(value, Mapping) else None for value in parents]


def _find_column(
    rows: InputRows, given: str | None, candidates: Sequence[str], role: str, option: str
) -> str:
    for name in (given,) if given else candidates:
        if name in rows.column_names or _column_values(rows, name) is not None:
            return name
    looked_for = repr(given) if given else " / ".join(map(repr, candidates))
    raise RescoreError(
        f"input {rows.path}: no {role} column {looked_for}; columns: "
        f"{', '.join(rows.column_names) or '(none)'}; name it with {option}"
    )


@dataclass
class Tasks:
    """The scoring inputs, one entry per row, and the rows that failed before scoring.

    ``responses`` is a list, or for parquet input a pyarrow string array: forked workers slice
    it without touching the parent's Python objects, each touch of which would copy a page.
    """

    columns: Columns
    sources: list[Any]
    responses: Any
    truths: list[Any]
    failures: dict[int, RowFailure]

    def texts(self, start: int, stop: int) -> list[Any]:
        """The responses of rows ``start`` to ``stop`` (excluded)."""
        if isinstance(self.responses, list):
            return self.responses[start:stop]
        return self.responses.slice(start, stop - start).to_pylist()


def collect_tasks(rows: InputRows, job: ScoreJob) -> Tasks:
    """Find the response, ground-truth and data-source columns and check every row's values."""
    response_name = _find_column(
        rows, job.response_column, RESPONSE_COLUMNS, "response", "--response-column"
    )
    truth_name = _find_column(
        rows, job.ground_truth_column, GROUND_TRUTH_COLUMNS, "ground truth", "--ground-truth-column"
    )
    source_name = None
    if job.data_source is None:
        source_name = _find_column(
            rows, None, (DATA_SOURCE_COLUMN,), "data source", "--data-source"
        )
        shared: dict[str, str] = {}  # one object per distinct source: fewer pages for workers
        sources = [
            shared.setdefault(value, value) if isinstance(value, str) else value
            for value in _column_values(rows, source_name) or ()
        ]
    else:
        sources = [job.data_source] * len(rows)
    truths = _column_values(rows, truth_name) or []
    responses = rows.string_array(response_name)
    if responses is None:
        responses = _column_values(rows, response_name) or []
        response_failures = {
            index: failure
            for index, value in enumerate(responses)
            if (failure := _check_response(value, response_name)) is not None
        }
    else:
        missing = _missing_response(response_name)
        response_failures = {
            index: missing for index, null in enumerate(responses.is_null().to_pylist()) if null
        }
    failures = {**response_failures, **rows.failures}
    for index, (source, truth) in enumerate(zip(sources, truths, strict=True)):
        if index not in failures:
            failure = _check_truth_and_source(truth, source, truth_name)
            if failure is not None:
                failures[index] = failure
    columns = Columns(response_name, truth_name, source_name)
    return Tasks(columns, sources, responses, truths, dict(sorted(failures.items())))


def _missing_response(column: str) -> RowFailure:
    return RowFailure("missing response", f"missing response (column {column!r})")


def _check_response(response: Any, column: str) -> RowFailure | None:
    if response is None:
        return _missing_response(column)
    if not isinstance(response, str):
        return RowFailure(
            "missing response",
            f"response (column {column!r}) must be a string, got {type(response).__name__}",
        )
    return None


def _check_truth_and_source(truth: Any, source: Any, truth_column: str) -> RowFailure | None:
    if truth is None:
        return RowFailure(
            "invalid ground truth", f"invalid ground truth: column {truth_column!r} is missing"
        )
    if not isinstance(source, str) or not source:
        return RowFailure(
            "missing data source",
            f"data_source must be a non-empty string, got {type(source).__name__}: {source!r:.40}",
        )
    return None


# -------------------------------------------------------------------------------------- options


def check_scorer_and_options(scorer: str, options: Mapping[str, Any]) -> None:
    """Fail early on a scorer registered nowhere or an option none of its registrations takes."""
    try:
        registrations = registrations_named(scorer)
    except UnknownScorer as error:
        raise RescoreError(str(error)) from error
    accepted = frozenset().union(*(r.options for r in registrations))
    unknown = sorted(options.keys() - accepted - VERL_CALL_KEYWORDS)
    if unknown:
        raise RescoreError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for scorer {scorer!r}; "
            f"valid options: {', '.join(sorted(accepted)) or '(none)'}"
        )


def _check_options_per_source(scorer: str, options: Mapping[str, Any], sources: set[str]) -> None:
    """Check ``options`` against each data source's scorer (from the declared option types, no
    scoring), so that a bad option name or value stops the job before any row is scored."""
    if not options:
        return
    for source in sorted(sources):
        try:
            lookup(source, scorer)
        except LookupError:
            continue  # reported for each of its rows
        try:
            check_options(scorer, source, options)
        except RewardPluginsError as error:
            raise RescoreError(f"--set: {error}") from error


# -------------------------------------------------------------------------------------- scoring

Outcome = dict[str, Any] | RowFailure
_job_state: tuple[str, Mapping[str, Any], Tasks] | None = None


def score_one(
    scorer: str, options: Mapping[str, Any], source: str, response: str, truth: Any
) -> Outcome:
    """Score one row; a row the scorer cannot read becomes a :class:`RowFailure`."""
    try:
        return dict(route(scorer, source, response, truth, options))
    except InvalidGroundTruth as error:
        return RowFailure("invalid ground truth", f"invalid ground truth: {error}")
    except UnknownDataSource as error:
        return RowFailure("unknown data source", f"unknown data source: {error}")
    except UnknownScorer as error:
        return RowFailure("unknown scorer", f"unknown scorer: {error}")
    except Exception as error:
        return RowFailure("scorer error", f"scorer error: {type(error).__name__}: {error}")


def _install_job(state: tuple[str, Mapping[str, Any], Tasks] | None) -> None:
    global _job_state
    _job_state = state


def _score_range(bounds: tuple[int, int]) -> list[Outcome | None]:
    """Outcomes of rows ``start`` to ``stop``; ``None`` for a row that failed before scoring."""
    assert _job_state is not None
    scorer, options, tasks = _job_state
    start, stop = bounds
    texts = tasks.texts(start, stop)
    return [
        None
        if index in tasks.failures
        else score_one(scorer, options, tasks.sources[index], text, tasks.truths[index])
        for index, text in enumerate(texts, start)
    ]


def _chunks(total: int, parts: int) -> list[tuple[int, int]]:
    """Ranges of at most 2,000 rows, at least 8 per worker for balance (fewer rows: fewer)."""
    size = max(1, min(2000, math.ceil(total / (parts * 8))))
    return [(start, min(total, start + size)) for start in range(0, total, size)]


def score_local(
    scorer: str,
    options: Mapping[str, Any],
    tasks: Tasks,
    workers: int,
    progress: Progress | None = None,
) -> list[Outcome | None]:
    """Outcomes of every row in order (``None`` where it failed before scoring), over
    ``workers`` processes when more than one.

    Workers are forked where the platform allows (they inherit the rows; only results travel
    back), spawned elsewhere (each receives the rows once).
    """
    state = (scorer, dict(options), tasks)
    ranges = _chunks(len(tasks.sources), workers)
    outcomes: list[Outcome | None] = []
    if workers <= 1:
        _install_job(state)
        try:
            for bounds in ranges:
                outcomes.extend(_score_range(bounds))
                if progress:
                    progress(bounds[1] - bounds[0])
        finally:
            _install_job(None)
        return outcomes
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    # Frozen objects are skipped by the garbage collector, so forked workers do not copy every
    # page of the inherited rows by traversing them.
    gc.freeze()
    try:
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_install_job, initargs=(state,)
        ) as pool:
            for bounds, chunk in zip(ranges, pool.map(_score_range, ranges), strict=True):
                outcomes.extend(chunk)
                if progress:
                    progress(bounds[1] - bounds[0])
    finally:
        gc.unfreeze()
    return outcomes


def _score_ray_batch(batch: dict[str, Any], scorer: str, options: Mapping[str, Any]) -> Any:
    """Ray Data ``map_batches`` function: pickled rows in, pickled outcomes out."""
    import numpy as np

    outcomes = [
        pickle.dumps(score_one(scorer, options, *pickle.loads(task))) for task in batch["task"]
    ]
    return {"index": batch["index"], "outcome": np.array(outcomes, dtype=object)}


def score_ray(
    scorer: str,
    options: Mapping[str, Any],
    tasks: Tasks,
    cpus: int | None,
    address: str | None,
    progress: Progress | None = None,
    ray_logs: bool = True,
) -> list[Outcome | None]:
    """:func:`score_local`'s result, computed on Ray Data.

    Uses the Ray instance this process is already connected to; otherwise connects to
    ``address`` (or ``RAY_ADDRESS``), or starts a local instance with ``cpus`` CPUs (all of
    them if ``None``), and disconnects at the end. A connection made here ships this process's
    ``reward_plugins`` package to the workers (a ``py_modules`` runtime environment), so that
    they score with the same code as a local run.
    """
    try:
        import pyarrow
        import ray
        import ray.data
    except ImportError as error:
        raise RescoreError(f"--backend ray needs Ray Data: {RAY_INSTALL_HINT}") from error
    import reward_plugins

    if not ray_logs:
        for name in ("ray", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    address = address or os.environ.get("RAY_ADDRESS") or None
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(
                address=address or "local",
                num_cpus=None if address else cpus,
                include_dashboard=False,
                logging_level=logging.WARNING if ray_logs else logging.ERROR,
                runtime_env={"py_modules": [str(Path(reward_plugins.__file__).parent)]},
            )
        except (ConnectionError, ValueError) as error:
            raise RescoreError(f"cannot start or reach Ray at {address}: {error}") from error
    total = len(tasks.sources)
    outcomes: list[Outcome | None] = [None] * total
    todo = [index for index in range(total) if index not in tasks.failures]
    try:
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False  # the caller's progress callback reports instead
        texts = tasks.texts(0, total)
        table = pyarrow.table(
            {
                "index": pyarrow.array(todo, pyarrow.int64()),
                "task": pyarrow.array(
                    [pickle.dumps((tasks.sources[i], texts[i], tasks.truths[i])) for i in todo],
                    pyarrow.binary(),
                ),
            }
        )
        parallelism = max(1, int(ray.cluster_resources().get("CPU", 1)))
        blocks = [table.slice(a, b - a) for a, b in _chunks(len(todo), parallelism)] or [table]
        dataset = ray.data.from_arrow(blocks).map_batches(
            cast(Any, _score_ray_batch),  # Ray's annotation has no room for fn_kwargs' parameters
            batch_format="numpy",
            batch_size=None,
            fn_kwargs={"scorer": scorer, "options": dict(options)},
        )
        if progress and tasks.failures:
            progress(len(tasks.failures))
        received = 0
        for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
            for index, outcome in zip(batch["index"], batch["outcome"], strict=True):
                outcomes[int(index)] = pickle.loads(outcome)
            received += len(batch["index"])
            if progress:
                progress(len(batch["index"]))
    finally:
        if started:
            ray.shutdown()
    if received != len(todo):
        raise RescoreError(f"Ray returned {received} results for {len(todo)} rows")
    return outcomes


# --------------------------------------------------------------------------------------- output


def _result_keys(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every result key, in order of first appearance (a scorer's keys are normally fixed)."""
    keys: dict[str, None] = {}
    for result in results:
        for key in result:
            if key not in keys:
                keys[key] = None
    return list(keys)


def _reward_columns(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {
        RESULT_PREFIX + key: [result.get(key) for result in results]
        for key in _result_keys(results)
    }


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in ``path``'s directory, renamed onto ``path`` at the end;
    on failure the temporary file is removed and ``path`` is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    os.close(descriptor)
    try:
        write(Path(temporary))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_rows(
    rows: InputRows, kept: Sequence[int], rewards: Mapping[str, list[Any]], path: Path
) -> None:
    """Write the ``kept`` rows with every input column unchanged plus the ``rewards`` columns
    (an input column of the same name is replaced), in the format of ``path``'s extension."""
    if path.suffix == ".parquet":
        pyarrow = _require_pyarrow()
        if rows.table is not None:
            table = rows.table if len(kept) == len(rows) else rows.table.take(kept)
        else:
            assert rows.records is not None
            try:
                table = pyarrow.Table.from_pylist([rows.records[i] for i in kept])
            except (pyarrow.ArrowException, TypeError, ValueError) as error:
                raise RescoreError(
                    f"output {path}: the JSONL rows cannot form a parquet table ({error}); "
                    "write .jsonl instead"
                ) from error
        for name, values in rewards.items():
            if name in table.column_names:
                table = table.drop_columns([name])
            table = table.append_column(name, pyarrow.array(values))
        _atomic_write(path, lambda temporary: pyarrow.parquet.write_table(table, temporary))
        return

    def records() -> Iterator[dict[str, Any]]:
        if rows.table is not None:
            source = rows.table if len(kept) == len(rows) else rows.table.take(kept)
            for offset in range(0, source.num_rows, 10_000):
                yield from source.slice(offset, 10_000).to_pylist()
        else:
            assert rows.records is not None
            yield from (rows.records[i] for i in kept)

    def write_jsonl(temporary: Path) -> None:
        names = list(rewards)
        with temporary.open("w", encoding="utf-8") as out:
            for position, record in enumerate(records()):
                record.update({name: rewards[name][position] for name in names})
                out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")

    _atomic_write(path, write_jsonl)


# -------------------------------------------------------------------------------------- summary


def _metric_summary(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    metrics = {}
    for key, _ in SUMMARY_METRICS:
        values = [result.get(key) for result in results]
        numbers = [v for v in values if isinstance(v, (int, float))]
        if values and len(numbers) == len(values):
            interval = bootstrap_mean(numbers)
            metrics[key] = {"mean": interval.mean, "low": interval.low, "high": interval.high}
    return metrics


def summarize(sources: Sequence[str], results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"sources": {data_source: group}, "overall": group}``, sources sorted, where a group is
    ``{"rows": n, "metrics": {key: {"mean", "low", "high"}}}`` with 95% bootstrap intervals."""
    by_source: dict[str, list[Mapping[str, Any]]] = {}
    for source, result in zip(sources, results, strict=True):
        by_source.setdefault(source, []).append(result)
    groups = {source: by_source[source] for source in sorted(by_source)}
    return {
        "sources": {
            source: {"rows": len(group), "metrics": _metric_summary(group)}
            for source, group in groups.items()
        },
        "overall": {"rows": len(results), "metrics": _metric_summary(results)},
    }


# ------------------------------------------------------------------------------------------ job


def run(job: ScoreJob, progress: Progress | None = None) -> dict[str, Any]:
    """Run ``job``: read, score, write the output (if any), and return the summary.

    Raises:
        RescoreError: bad arguments, an unreadable input, a missing optional dependency.
        BadRowError: with ``on_error="fail"``, rows that cannot be scored (nothing is written).
    """
    _check_format(job.input, "input")
    if job.output is not None:
        _check_format(job.output, "output")
    check_scorer_and_options(job.scorer, job.options)
    if job.workers is not None and job.workers < 1:
        raise RescoreError(f"--workers must be at least 1, got {job.workers}")

    started = time.perf_counter()
    rows = read_rows(job.input)
    tasks = collect_tasks(rows, job)
    read_seconds = time.perf_counter() - started
    scored_sources = {s for i, s in enumerate(tasks.sources) if i not in tasks.failures}
    _check_options_per_source(job.scorer, job.options, scored_sources)

    started = time.perf_counter()
    if job.backend == "ray":
        outcomes = score_ray(
            job.scorer, job.options, tasks, job.workers, job.ray_address, progress, job.ray_logs
        )
    else:
        outcomes = score_local(job.scorer, job.options, tasks, job.workers or 1, progress)
    score_seconds = time.perf_counter() - started

    failures = dict(tasks.failures)
    kept, results = [], []
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, RowFailure):
            failures[index] = outcome
        elif outcome is not None:
            kept.append(index)
            results.append(outcome)
    bad = sorted(failures)
    if bad and job.on_error == "fail":
        first = failures[bad[0]]
        more = ""
        if len(bad) > 1:
            more = f" ({len(bad) - 1} more bad row(s); --on-error skip drops them)"
        raise BadRowError(f"{rows.path}: {rows.unit} {rows.numbers[bad[0]]}: {first.detail}{more}")

    rewards = _reward_columns(results)
    started = time.perf_counter()
    if job.output is not None:
        write_rows(rows, kept, rewards, job.output)
    write_seconds = time.perf_counter() - started

    started = time.perf_counter()
    groups = summarize([tasks.sources[i] for i in kept], results)
    summary_seconds = time.perf_counter() - started
    return {
        "input": str(job.input),
        "output": None if job.output is None else str(job.output),
        "scorer": job.scorer,
        "options": dict(job.options),
        "backend": job.backend,
        "workers": job.workers,
        "columns": {
            "response": tasks.columns.response,
            "ground_truth": tasks.columns.ground_truth,
            "data_source": tasks.columns.data_source,
        },
        "data_source_option": job.data_source,
        "rows": len(rows),
        "scored": len(kept),
        "replaced_columns": sorted(rewards.keys() & set(rows.column_names)),
        "skipped": {
            "rows": len(bad),
            "reasons": dict(Counter(failures[i].reason for i in bad).most_common()),
            "examples": [
                {rows.unit: rows.numbers[i], "reason": failures[i].detail} for i in bad[:10]
            ],
        },
        **groups,
        "seconds": {
            "read": read_seconds,
            "score": score_seconds,
            "write": write_seconds,
            "summary": summary_seconds,
        },
    }
