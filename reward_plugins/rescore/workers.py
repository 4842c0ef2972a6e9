"""Chunk execution: what a worker does with one chunk, and the backends that run workers.

A worker parses its chunk (through the input's format), scores every row, serializes the output
(through the output's format) and counts the summary, so workers scale the whole job. The
backends (the parent alone, a process pool, Ray tasks) return the results in input order, with
at most a few chunks per worker in flight, so memory does not grow with the rows.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from reward_plugins.rescore import datasets, summary
from reward_plugins.rescore.errors import RescoreError
from reward_plugins.rescore.formats import Chunk, ChunkWriter, Format
from reward_plugins.rescore.formats.base import NO_OUTPUT
from reward_plugins.rescore.job import ScoreJob
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.runtime import rows
from reward_plugins.runtime.scoring import score_one

IN_FLIGHT_PER_WORKER = 3

RAY_INSTALL_HINT = 'pip install "reward-plugins[ray]"'


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class FailedRow(NamedTuple):
    number: int
    failure: rows.RowFailure
    row: Any  # the line's text (JSONL) or the row's values (parquet), for the failures file


class ChunkResult(NamedTuple):
    file_index: int
    last: bool
    rows: int
    output: Any  # the output format's chunk (JSONL bytes, a pyarrow.RecordBatch) or None
    failed: list[FailedRow]
    counts: summary.Counts
    stringified: int
    replaced: frozenset[str]  # input columns that a result column replaced
    digest: bytes  # the input format's digest of the chunk
    seconds: float  # the worker's time on the chunk
    described: list[Any]


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs to turn a :class:`Chunk` into a :class:`ChunkResult` (picklable)."""

    scorer: str
    options: Mapping[str, Any]
    columns: rows.Columns
    data_source: str | None
    names: tuple[str, ...]  # each input as the user named it
    formats: tuple[Format, ...]  # each input's format
    output_formats: tuple[Format | None, ...]  # each input's output format, None: no output
    output_schema: Any = None  # what the chunks of the output made of several inputs share
    describe: Callable[[ScoredRow], Any] | None = None
    extra_info: bool = False  # the scorer takes extra_info: build it from each row
    sources: datasets.PromptIndex | None = None  # --dataset: each row's data source joined


# --------------------------------------------------------------------------- the worker


def _score_record(
    job: WorkerJob, record: Mapping[str, Any]
) -> tuple[str, Any, bool, dict[str, Any] | rows.RowFailure]:
    """``(data_source, response, stringified, outcome)`` of one parsed row."""
    columns = job.columns
    response = rows.column_value(record, columns.response)
    if not isinstance(response, str):
        detail = (
            f"missing response (column {columns.response!r})"
            if response is None
            else f"response (column {columns.response!r}) must be a string, got "
            f"{type(response).__name__}"
        )
        return "", response, False, rows.RowFailure("missing response", detail)
    truth = rows.column_value(record, columns.ground_truth)
    if truth is None:
        detail = f"invalid ground truth: column {columns.ground_truth!r} is missing"
        return "", response, False, rows.RowFailure("invalid ground truth", detail)
    try:
        truth, stringified = rows.ground_truth(truth)
    except ValueError as error:
        detail = f"invalid ground truth: {error}"
        return "", response, False, rows.RowFailure("invalid ground truth", detail)
    if job.sources is not None:
        source = job.sources.data_source(record, truth)
        if isinstance(source, rows.RowFailure):
            return "", response, stringified, source
    else:
        source = job.data_source or rows.column_value(record, columns.data_source or "")
    if not isinstance(source, str) or not source:
        detail = (
            f"data_source must be a non-empty string (column {columns.data_source!r}), got "
            f"{type(source).__name__}: {source!r:.40}"
        )
        return "", response, stringified, rows.RowFailure("missing data source", detail)
    extra_info = rows.extra_info(record) if job.extra_info else None
    if isinstance(extra_info, rows.RowFailure):
        return "", response, stringified, extra_info
    outcome = score_one(job.scorer, job.options, source, response, truth, extra_info)
    return source, response, stringified, outcome


def _step(record: Mapping[str, Any]) -> int | None:
    """The row's integer ``step`` column, else ``None``."""
    step = record.get(rows.STEP_COLUMN)
    return step if type(step) is int else None


def process_chunk(job: WorkerJob, chunk: Chunk) -> ChunkResult:
    """Parse, score and serialize one chunk, and count its summary."""
    started = time.perf_counter()
    fmt = job.formats[chunk.file_index]
    name = job.names[chunk.file_index]
    writer, read = _chunk_writer(job, chunk)
    failed: list[FailedRow] = []
    tally: summary.Tally = Counter()
    described: list[Any] = []
    replaced: set[str] = set()
    stringified = total = 0
    for number, position, raw, parsed in fmt.records(chunk.payload, chunk.first_number, read):
        total += 1
        if isinstance(parsed, rows.RowFailure):
            failed.append(FailedRow(number, parsed, _raw_text(raw)))
            continue
        refused = writer.refuse(raw, parsed)
        if refused is not None:
            failed.append(FailedRow(number, refused, _raw_text(raw)))
            continue
        source, response, was_stringified, outcome = _score_record(job, parsed)
        stringified += was_stringified
        if isinstance(outcome, rows.RowFailure):
            failed.append(FailedRow(number, outcome, _raw_text(raw)))
            continue
        step = _step(parsed)
        tally[source, step, tuple(outcome.items())] += 1
        rewards = rows.reward_columns(outcome)
        if not parsed.keys().isdisjoint(rewards):
            replaced.update(rewards.keys() & parsed.keys())
        writer.add(position, raw, parsed, rewards)
        if job.describe is not None:
            described.append(
                job.describe(ScoredRow(name, number, parsed, step, source, response, outcome))
            )
    output, also_replaced = writer.finish()
    return ChunkResult(
        chunk.file_index,
        chunk.last,
        total,
        output,
        failed,
        summary.by_key(tally),
        stringified,
        frozenset(replaced | also_replaced),
        chunk.digest,
        time.perf_counter() - started,
        described,
    )


def _chunk_writer(job: WorkerJob, chunk: Chunk) -> tuple[ChunkWriter, list[str] | None]:
    """The writer of the chunk's output, and the columns to read (``None``: all of them)."""
    fmt = job.formats[chunk.file_index]
    output_format = job.output_formats[chunk.file_index]
    if output_format is None:
        return NO_OUTPUT, _read_columns(job)
    where = f"{job.names[chunk.file_index]}: {fmt.unit}s {chunk.first_number} onwards"
    writer = output_format.chunk_writer(fmt, chunk.payload, job.output_schema, where)
    return writer, None if output_format.whole_rows else _read_columns(job)


def _raw_text(raw: Any) -> Any:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw


def _read_columns(job: WorkerJob) -> list[str]:
    """The top-level columns that scoring (and describing) reads."""
    columns = job.columns
    wanted = [columns.response, columns.ground_truth, columns.data_source or "", rows.STEP_COLUMN]
    if job.extra_info:
        wanted += [rows.EXTRA_INFO_COLUMN, *rows.AGENT_LOOP_COLUMNS]
    if job.describe is not None:
        wanted += ["input", "score"]
    if job.sources is not None:
        wanted.append(datasets.PROMPT_COLUMN)
    return list(dict.fromkeys(name.partition(".")[0] for name in wanted))


# ------------------------------------------------------------------------- executors


_worker_job: WorkerJob | None = None


def _install(job: WorkerJob) -> None:
    global _worker_job
    _worker_job = job
    # Ctrl-C reaches the whole process group: the parent stops the pool and cleans up.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _pool_task(chunk: Chunk) -> ChunkResult:
    assert _worker_job is not None
    return process_chunk(_worker_job, chunk)


def _in_order(
    submit: Callable[[Chunk], Any],
    result: Callable[[Any], ChunkResult],
    chunks: Iterable[Chunk],
    depth: int,
) -> Iterator[ChunkResult]:
    """Results of ``chunks`` in order, with at most ``depth`` submitted and not yet taken."""
    pending: deque[Any] = deque()
    for chunk in chunks:
        pending.append(submit(chunk))
        if len(pending) >= depth:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())


@contextlib.contextmanager
def executor(
    job: ScoreJob, worker_job: WorkerJob
) -> Iterator[Callable[[Iterable[Chunk]], Iterator[ChunkResult]]]:
    """A function from chunks to their results in order, on the job's backend."""
    if job.backend == "ray":
        with _ray_executor(job, worker_job) as run_chunks:
            yield run_chunks
        return
    workers = job.workers or 1
    if workers == 1:
        yield lambda chunks: (process_chunk(worker_job, chunk) for chunk in chunks)
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(method),
        initializer=_install,
        initargs=(worker_job,),
    )
    try:
        yield lambda chunks: _in_order(
            lambda chunk: pool.submit(_pool_task, chunk),
            Future.result,
            chunks,
            workers * IN_FLIGHT_PER_WORKER,
        )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def _ray_executor(
    job: ScoreJob, worker_job: WorkerJob
) -> Iterator[Callable[[Iterable[Chunk]], Iterator[ChunkResult]]]:
    try:
        import ray
    except ImportError:
        raise RescoreError(f"--backend ray needs Ray: {RAY_INSTALL_HINT}") from None
    import reward_plugins
    from reward_plugins.runtime.ray_session import RayUnavailable, ray_session

    package = str(Path(reward_plugins.__file__).parent)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(
                ray_session(
                    job.ray_address, cpus=job.workers, quiet=job.quiet, py_modules=[package]
                )
            )
        except RayUnavailable as error:
            raise RescoreError(str(error)) from None
        remote = ray.remote(process_chunk)
        job_ref = ray.put(worker_job)
        depth = max(1, int(ray.cluster_resources().get("CPU", 1))) * IN_FLIGHT_PER_WORKER
        yield lambda chunks: _in_order(
            lambda chunk: remote.remote(job_ref, chunk), ray.get, chunks, depth
        )
