"""The job: read inputs in chunks, score each chunk in a worker, write and summarize in order.

The parent process only reads raw chunks (JSONL bytes or parquet record batches), hands them to
workers (itself with one worker, a process pool, or Ray tasks), and writes what comes back in
input order. Each worker parses its chunk, scores every row, serializes the output and counts
the summary, so workers scale the whole job, and at most a few chunks per worker are in flight,
so memory does not grow with the rows. Chunk boundaries depend only on the input, so the output
is byte-identical for every backend and worker count.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import multiprocessing
import os
import queue
import signal
import threading
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, TypeVar

import orjson

from reward_plugins.errors import (
    InvalidGroundTruth,
    RewardPluginsError,
    UnknownDataSource,
    UnknownScorer,
)
from reward_plugins.registry import registrations_named
from reward_plugins.rescore import datasets, files, rows, summary
from reward_plugins.rescore.records import ScoredRow
from reward_plugins.router import check_options, route

JSONL_CHUNK_BYTES = 1 << 21
"""Bytes of JSONL per chunk (whole lines; a longer line makes a longer chunk)."""

PARQUET_CHUNK_ROWS = 1024
COLUMN_SAMPLE_ROWS = 1000
"""The columns a job reads are chosen from this many rows at the start of its inputs."""

IN_FLIGHT_PER_WORKER = 3

RAY_INSTALL_HINT = 'pip install "reward-plugins[ray]"'
PARQUET_INSTALL_HINT = 'pip install "reward-plugins[parquet]"'

Progress = Callable[[int], None]
"""Called with the number of rows just handled."""


class RescoreError(Exception):
    """A job that cannot run as asked: bad arguments or paths, a missing dependency."""


class BadRowError(RescoreError):
    """Input rows that cannot be scored or written (``on_error="fail"``); names the first."""


@dataclass(frozen=True)
class ScoreJob:
    """What ``reward-plugins score`` (or ``report``) was asked to do.

    ``inputs`` are files, directories (verl's ``{step}.jsonl`` run directories) or glob
    patterns. ``output`` is a file for one input file, a directory for a run (one output per
    input, same name), or with ``merge`` one file for all; ``None`` scores and summarizes only.
    ``workers`` is the number of local processes, or the CPUs of a local Ray instance (``None``:
    1 locally, every CPU on Ray). ``quiet`` silences Ray. ``describe`` (a picklable function of
    a :class:`ScoredRow`) runs in the workers on every scored row; :func:`run` hands its results
    to ``on_described`` in input order. ``also_writes`` names the files the caller writes besides
    (a summary): none may be an input or an output. ``datasets`` are verl's dataset files of the
    run: each row's data source is joined from them on its prompt (:mod:`.datasets`).
    """

    inputs: tuple[str | Path, ...]
    output: Path | None = None
    merge: bool = False
    scorer: str = "compute_score"
    options: Mapping[str, Any] = field(default_factory=dict)
    data_source: str | None = None
    data_source_column: str | None = None
    response_column: str | None = None
    ground_truth_column: str | None = None
    on_error: Literal["fail", "skip"] = "fail"
    workers: int | None = None
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    quiet: bool = False
    resume: bool = False
    describe: Callable[[ScoredRow], Any] | None = None
    also_writes: tuple[Path, ...] = ()
    datasets: tuple[Path, ...] = ()


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------- chunks


class Chunk(NamedTuple):
    """Consecutive rows of one input: JSONL bytes (whole lines) or a parquet record batch."""

    file_index: int
    first_number: int  # 1-based line (JSONL) or row (parquet) of the chunk's first row
    payload: Any
    last: bool  # the file's last chunk
    digest: bytes  # CRC-32 of a JSONL chunk's bytes, for the manifest (empty for parquet)


class FailedRow(NamedTuple):
    number: int
    failure: rows.RowFailure
    row: Any  # the line's text (JSONL) or the row's values (parquet), for the failures file


class ChunkResult(NamedTuple):
    file_index: int
    last: bool
    rows: int
    output: Any  # bytes (JSONL), a pyarrow.RecordBatch (parquet) or None
    failed: list[FailedRow]
    counts: summary.Counts
    stringified: int
    replaced: frozenset[str]  # input columns that a result column replaced
    digest: bytes  # the chunk's CRC-32 (empty for parquet)
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
    formats: tuple[str, ...]  # each input's format
    output_formats: tuple[str | None, ...]  # each input's output format, None: no output
    parquet_schema: Any = None  # the input columns of a parquet output made from JSONL
    describe: Callable[[ScoredRow], Any] | None = None
    extra_info: bool = False  # the scorer takes extra_info: build it from each row
    sources: datasets.PromptIndex | None = None  # --dataset: each row's data source joined


def _parquet_module() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise RescoreError(
            f"reading and writing parquet needs pyarrow: {PARQUET_INSTALL_HINT}"
        ) from None
    return pyarrow


def read_chunks(path: Path, file_index: int, fmt: str) -> Iterator[Chunk]:
    """The chunks of one input file, the last one marked; an empty file gives one empty chunk,
    so that its output is written too.

    Raises:
        RescoreError: the file cannot be read (not parquet, not gzip, an I/O error).
    """
    number, previous = 1, None
    for payload in _payloads(path, fmt):
        if previous is not None:
            yield _chunk(file_index, number, previous, fmt, last=False)
            number += previous.num_rows if fmt == ".parquet" else previous.count(b"\n")
        previous = payload
    yield _chunk(file_index, number, b"" if previous is None else previous, fmt, last=True)


def _chunk(file_index: int, number: int, payload: Any, fmt: str, last: bool) -> Chunk:
    digest = b"" if fmt == ".parquet" else zlib.crc32(payload).to_bytes(4, "big")
    return Chunk(file_index, number, payload, last, digest)


def _payloads(path: Path, fmt: str) -> Iterator[Any]:
    try:
        if fmt == ".parquet":
            pyarrow = _parquet_module()
            try:
                reader = pyarrow.parquet.ParquetFile(path)
                empty = True
                for batch in reader.iter_batches(batch_size=PARQUET_CHUNK_ROWS):
                    empty = False
                    yield batch
                if empty:  # no rows: the columns still go to the output
                    yield pyarrow.RecordBatch.from_pylist([], schema=reader.schema_arrow)
            except pyarrow.ArrowException as error:
                raise RescoreError(f"input {path}: not a readable parquet file: {error}") from None
            return
        with files.open_jsonl_input(path) as stream:
            # A block, completed to the end of its last line: one copy of the bytes at most.
            while payload := stream.read(JSONL_CHUNK_BYTES) + stream.readline():
                yield payload
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
        raise RescoreError(f"input {path}: cannot read: {error}") from None


# --------------------------------------------------------------------------- the worker


def score_one(
    scorer: str,
    options: Mapping[str, Any],
    source: str,
    response: str,
    truth: Any,
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any] | rows.RowFailure:
    """Score one row; a row the scorer cannot read becomes a :class:`RowFailure`."""
    try:
        return dict(route(scorer, source, response, truth, options, extra_info=extra_info))
    except InvalidGroundTruth as error:
        return rows.RowFailure("invalid ground truth", f"invalid ground truth: {error}")
    except UnknownDataSource as error:
        return rows.RowFailure("unknown data source", f"unknown data source: {error}")
    except UnknownScorer as error:
        return rows.RowFailure("unknown scorer", f"unknown scorer: {error}")
    except Exception as error:
        return rows.RowFailure("scorer error", f"scorer error: {type(error).__name__}: {error}")


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


def process_chunk(job: WorkerJob, chunk: Chunk) -> ChunkResult:
    """Parse, score and serialize one chunk, and count its summary."""
    started = time.perf_counter()
    fmt = job.formats[chunk.file_index]
    output_format = job.output_formats[chunk.file_index]
    splice = output_format in (".jsonl", ".jsonl.gz") and fmt != ".parquet"
    name = job.names[chunk.file_index]
    failed: list[FailedRow] = []
    lines: list[bytes] = []  # JSONL output
    kept: list[tuple[int, dict[str, Any], dict[str, Any]]] = []  # (position, record, rewards)
    counts: summary.Counts = Counter()
    described: list[Any] = []
    replaced: set[str] = set()
    stringified = total = 0
    if fmt == ".parquet":
        batch = chunk.payload
        needed = None if output_format in (".jsonl", ".jsonl.gz") else _read_columns(job, batch)
        source_rows = enumerate((batch if needed is None else batch.select(needed)).to_pylist())
        numbered: Iterable[tuple[int, int, Any, dict[str, Any] | rows.RowFailure]] = (
            (chunk.first_number + i, i, record, record) for i, record in source_rows
        )
    else:
        numbered = (
            (number, position, line, rows.parse_line(line))
            for position, (number, line) in enumerate(
                rows.jsonl_lines(chunk.payload, chunk.first_number)
            )
        )
    for number, position, raw, parsed in numbered:
        total += 1
        if isinstance(parsed, rows.RowFailure):
            failed.append(FailedRow(number, parsed, _raw_text(raw)))
            continue
        if output_format == ".parquet" and fmt != ".parquet":
            column = rows.lone_surrogate_column(raw, parsed)
            if column is not None:
                failed.append(FailedRow(number, _unwritable(column), _raw_text(raw)))
                continue
        source, response, was_stringified, outcome = _score_record(job, parsed)
        stringified += was_stringified
        if isinstance(outcome, rows.RowFailure):
            failed.append(FailedRow(number, outcome, _raw_text(raw)))
            continue
        step = parsed.get(rows.STEP_COLUMN)
        if type(step) is not int:
            step = None
        counts[source, step, tuple(map(outcome.get, summary.KEYS))] += 1
        rewards = rows.reward_columns(outcome)
        if not parsed.keys().isdisjoint(rewards):
            replaced.update(rewards.keys() & parsed.keys())
        if splice:
            lines.append(rows.spliced_line(raw, parsed, rewards))
        else:
            kept.append((position, parsed, rewards))
        if job.describe is not None:
            described.append(
                job.describe(ScoredRow(name, number, parsed, step, source, response, outcome))
            )
    output = None
    if output_format == ".parquet":
        output = _parquet_output(job, chunk, fmt, kept, name)
        if fmt == ".parquet":
            names = chunk.payload.schema.names
            replaced.update(key for key in (kept[0][2] if kept else ()) if key in names)
    elif output_format is not None:
        if not splice:
            lines = [rows.dumps_record({**record, **rewards}) for _, record, rewards in kept]
        output = b"\n".join([*lines, b""]) if lines else b""
        if output_format == ".jsonl.gz":
            output = gzip.compress(output, compresslevel=6, mtime=0)
    return ChunkResult(
        chunk.file_index,
        chunk.last,
        total,
        output,
        failed,
        counts,
        stringified,
        frozenset(replaced),
        chunk.digest,
        time.perf_counter() - started,
        described,
    )


def _unwritable(column: str) -> rows.RowFailure:
    return rows.RowFailure(
        "text parquet cannot hold",
        f"column {column!r} holds a lone surrogate (a \\udcxx escape), which the UTF-8 strings "
        "of parquet cannot hold: write .jsonl, which keeps it",
    )


def _raw_text(raw: Any) -> Any:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw


def _read_columns(job: WorkerJob, batch: Any) -> list[str]:
    """The top-level columns of ``batch`` that scoring (and describing) reads."""
    columns = job.columns
    wanted = [columns.response, columns.ground_truth, columns.data_source or "", rows.STEP_COLUMN]
    if job.extra_info:
        wanted += [rows.EXTRA_INFO_COLUMN, *rows.AGENT_LOOP_COLUMNS]
    if job.describe is not None:
        wanted += ["input", "score"]
    if job.sources is not None:
        wanted.append(datasets.PROMPT_COLUMN)
    names = set(batch.schema.names)
    return list(dict.fromkeys(n.partition(".")[0] for n in wanted if n.partition(".")[0] in names))


def _parquet_output(
    job: WorkerJob,
    chunk: Chunk,
    fmt: str,
    kept: Sequence[tuple[int, Any, dict[str, Any]]],
    name: str,
) -> Any:
    pyarrow = _parquet_module()
    if fmt == ".parquet":
        batch = chunk.payload
        if len(kept) != batch.num_rows:
            batch = batch.take(pyarrow.array([position for position, *_ in kept], pyarrow.int64()))
        if job.parquet_schema is not None:
            batch = conform(batch, job.parquet_schema)
    else:
        try:
            batch = pyarrow.RecordBatch.from_pylist(
                [record for _, record, _ in kept], schema=job.parquet_schema
            )
        except (pyarrow.ArrowException, TypeError, ValueError, OverflowError) as error:
            raise DataError(
                f"{name}: lines {chunk.first_number} onwards cannot form the parquet columns: "
                f"{error}"
            ) from None
    rewards: dict[str, list[Any]] = {}
    for _, _, result in kept:
        for key, value in result.items():
            rewards.setdefault(key, []).append(value)
    for key, values in rewards.items():
        if key in batch.schema.names:
            batch = batch.drop_columns([key])
        batch = batch.append_column(key, pyarrow.array(values))
    return batch


class DataError(Exception):
    """Rows that cannot be written in the output's format (raised in a worker)."""


def conform(batch: Any, schema: Any) -> Any:
    """``batch`` with exactly the fields of ``schema``: cast, and null where it has none."""
    pyarrow = _parquet_module()
    arrays = []
    for field_ in schema:
        if field_.name in batch.schema.names:
            arrays.append(batch.column(field_.name).cast(field_.type))
        else:
            arrays.append(pyarrow.nulls(batch.num_rows, field_.type))
    return pyarrow.RecordBatch.from_arrays(arrays, schema=schema)


# ------------------------------------------------------------------------- executors

T = TypeVar("T")
_BACKGROUND_DEPTH = 4


def in_background(items: Generator[T, None, None]) -> Generator[T, None, None]:
    """``items``, produced in a thread a few ahead: reading, decompressing and hashing release
    the GIL, so they overlap the scoring. An error of the producer is raised here; closing
    this generator stops the thread (and closes ``items``)."""
    pending: queue.Queue[tuple[str, Any]] = queue.Queue(_BACKGROUND_DEPTH)
    stop = threading.Event()

    def put(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                pending.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    return
            put(("end", None))
        except BaseException as error:
            put(("error", error))
        finally:
            items.close()

    thread = threading.Thread(target=produce, name="reward-plugins-reader", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = pending.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


class BackgroundWriter:
    """A binary stream written by a thread, so that writing overlaps the scoring; an error of
    the write (a full disk) is raised by the next :meth:`write` or by :meth:`close`."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._pending: queue.Queue[bytes | None] = queue.Queue(_BACKGROUND_DEPTH)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="reward-plugins-writer")
        self._thread.start()

    def _drain(self) -> None:
        while (data := self._pending.get()) is not None:
            if self._error is None:
                try:
                    self._stream.write(data)
                except BaseException as error:
                    self._error = error

    def write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._pending.put(data)

    def close(self) -> None:
        """Write what is queued, stop the thread, close the stream; raise a write's error."""
        if self._thread.is_alive():
            self._pending.put(None)
            self._thread.join()
        self._stream.close()
        if self._error is not None:
            raise self._error


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
    from reward_plugins.rescore.ray_backend import RayUnavailable, ray_session

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


# ------------------------------------------------------------------------------- the job


@dataclass
class _Plan:
    inputs: list[Path]
    formats: list[str]
    targets: list[Path | None]
    todo: list[int]  # indices of the inputs to score (others: complete, with --resume)
    changed: list[int]  # with --resume: inputs whose output changed after it was written
    manifest: files.Manifest | None
    failures_path: Path | None


def plan(job: ScoreJob) -> _Plan:
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
    except files.PathError as error:
        raise RescoreError(str(error)) from None
    if ".parquet" in formats or (job.output is not None and job.output.name.endswith(".parquet")):
        _parquet_module()
    directory_output = job.output is not None and is_run and not job.merge
    if job.resume and not directory_output:
        raise RescoreError("--resume needs a run (a directory of inputs) and a directory OUTPUT")
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
    try:
        if job.output is not None:
            directory = job.output if directory_output else job.output.parent
            files.check_writable_directory(directory, f"output {job.output}")
        written = [*targets, *others]
        if directory_output:
            written.append(job.output / files.MANIFEST_NAME)  # type: ignore[operator]
        for target in {t for t in written if t is not None}:
            files.remove_stale_temporaries(target)
    except files.PathError as error:
        raise RescoreError(str(error)) from None
    manifest = None
    todo = list(range(len(inputs)))
    changed: list[int] = []
    if directory_output:
        assert job.output is not None
        manifest = files.Manifest.load(job.output, _settings(job))
        if job.resume:
            states = [_resumed(manifest, inputs[i], formats[i], targets[i]) for i in todo]
            changed = [i for i in todo if states[i] == "changed"]
            todo = [i for i in todo if states[i] != "kept"]
    return _Plan(inputs, formats, targets, todo, changed, manifest, failures_path)


def takes_extra_info(scorer: str) -> bool:
    """Whether a registration of ``scorer`` receives ``extra_info`` (the row's, see
    :func:`rows.extra_info`); only then is it built for each row."""
    return any("extra_info" in found.context for found in registrations_named(scorer))


def input_hash(path: Path, fmt: str) -> str:
    """The hash of an input in a manifest: for JSONL, the sha256 of its chunks' CRC-32s (computed
    as the chunks are read, at 3 GB/s: any change to a chunk shows but for a chance of 2**-32),
    for parquet the sha256 of the file."""
    if fmt == ".parquet":
        return files.file_digest(path)
    digests = hashlib.sha256()
    for chunk in read_chunks(path, 0, fmt):
        digests.update(chunk.digest)
    return digests.hexdigest()


def _resumed(
    manifest: files.Manifest, source: Path, fmt: str, target: Path | None
) -> Literal["kept", "changed", "todo"]:
    """What ``--resume`` does with an output: keep it (listed, its input unchanged, and itself as
    it was written), score it again because it ``changed`` after it was written (truncated,
    edited), or score it (not listed, listed by a version that did not record the output's
    fingerprint, or its input changed)."""
    entry = None if target is None else manifest.listed(source, target)
    if entry is None or "output_crc32" not in entry:
        return "todo"
    if entry.get("sha256") != input_hash(source, fmt):
        return "todo"
    assert target is not None
    return "kept" if manifest.intact(target, entry) else "changed"


def _settings(job: ScoreJob) -> dict[str, Any]:
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


def _rows_to_score(the_plan: _Plan) -> Iterator[dict[str, Any] | rows.RowFailure]:
    """The rows of the inputs to score, parsed, in order (lazily: for a look at the first)."""
    for index in the_plan.todo:
        for chunk in read_chunks(the_plan.inputs[index], index, the_plan.formats[index]):
            if the_plan.formats[index] == ".parquet":
                yield from chunk.payload.slice(0, COLUMN_SAMPLE_ROWS).to_pylist()
            else:
                for _, line in rows.jsonl_lines(chunk.payload, chunk.first_number):
                    yield rows.parse_line(line)


def _columns(job: ScoreJob, the_plan: _Plan) -> rows.Columns:
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


def _check_json_columns(path: Path) -> None:
    """Refuse, before any work, a parquet input whose columns JSON has no exact form for:
    bytes, decimals, durations and intervals."""
    pyarrow = _parquet_module()
    types = pyarrow.types
    refused = (
        types.is_binary,
        types.is_large_binary,
        types.is_fixed_size_binary,
        types.is_decimal,
        types.is_duration,
        types.is_interval,
    )

    def without_json_form(data_type: Any) -> bool:
        if any(test(data_type) for test in refused):
            return True
        return any(without_json_form(data_type.field(i).type) for i in range(data_type.num_fields))

    for field_ in pyarrow.parquet.read_schema(path):
        if without_json_form(field_.type):
            raise RescoreError(
                f"input {path}: column {field_.name!r} holds {field_.type} values, which JSONL "
                "cannot hold exactly; write .parquet"
            )


class _Stats:
    """Row counts and skipped rows of the whole job, for the summary."""

    def __init__(self) -> None:
        self.rows = 0
        self.scored = 0
        self.stringified = 0
        self.replaced: set[str] = set()
        self.reasons: Counter[str] = Counter()
        self.examples: list[dict[str, Any]] = []
        self.counts: summary.Counts = Counter()
        self.seconds = {"workers": 0.0, "write": 0.0}


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
    columns = _columns(job, the_plan) if todo else None
    output_formats: list[str | None] = []
    for index, target in enumerate(the_plan.targets):
        out = None if target is None else files.file_format(target)
        if out in (".jsonl", ".jsonl.gz") and the_plan.formats[index] == ".parquet":
            _check_json_columns(the_plan.inputs[index])
        output_formats.append(out)
    parquet_schema = None
    if todo and ".parquet" in output_formats:
        parquet_schema = _union_schema(the_plan)
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
        tuple(output_formats),
        parquet_schema,
        job.describe,
        takes_extra_info(job.scorer),
        sources,
    )
    stats = _Stats()
    with contextlib.ExitStack() as stack:
        failures = _Failures(the_plan.failures_path, stack)
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
        try:
            _write_all(job, the_plan, run_chunks(chunks), stats, failures, progress, on_described)
        except DataError as error:  # from Ray, wrapped: the worker's own error is its cause
            raise BadRowError(str(getattr(error, "cause", None) or error)) from None
        failures.finish()
    seconds = time.perf_counter() - started
    finished = time.perf_counter()
    groups = summary.finish(stats.counts)
    stats.seconds["summary"] = time.perf_counter() - finished
    scored_now = set(todo)
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


# --------------------------------------------------------------------------- writing


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _union_schema(the_plan: _Plan) -> Any:
    """The input columns of a parquet output made of several inputs (``--merge``) or of JSONL:
    every key of every row (a first pass over the JSONL inputs) and every parquet input's
    columns, in order of first appearance; ``None`` when each parquet output comes from one
    parquet input (its batches are written as they are).

    Raises:
        BadRowError: a column whose values have different types in two rows.
    """
    pyarrow = _parquet_module()
    by_target: dict[Path, list[int]] = {}
    for index in the_plan.todo:
        target = the_plan.targets[index]
        if target is not None and target.name.endswith(".parquet"):
            by_target.setdefault(target, []).append(index)
    # Merged or JSONL rows: at most one such output (a run's own outputs mirror its inputs).
    mixed = [f for f in by_target.values() if len(f) > 1 or the_plan.formats[f[0]] != ".parquet"]
    if not mixed:
        return None
    feeders = mixed[0]
    schemas = []
    first: dict[str, tuple[str, str]] = {}  # column -> (kind, where)
    for index in feeders:
        path, fmt = the_plan.inputs[index], the_plan.formats[index]
        if fmt == ".parquet":
            schemas.append(pyarrow.parquet.read_schema(path))
            continue
        for chunk in read_chunks(path, index, fmt):
            records = []
            for number, line in rows.jsonl_lines(chunk.payload, chunk.first_number):
                record = rows.parse_line(line)
                if not isinstance(record, dict) or rows.lone_surrogate_column(line, record):
                    continue  # a bad row, which the worker names
                records.append(record)
                for key, value in record.items():
                    kind = _kind(value)
                    seen = first.get(key)
                    if seen is None or seen[0] == "null":
                        first[key] = (kind, f"{path}: line {number}")
                    elif kind not in ("null", seen[0]):
                        raise BadRowError(
                            f"column {key!r} has {seen[0]} values ({seen[1]}) and {kind} values "
                            f"({path}: line {number}); a parquet column has one type: write "
                            ".jsonl, or make the column consistent"
                        )
            if records:
                try:
                    schemas.append(pyarrow.schema(pyarrow.array(records).type))
                except (pyarrow.ArrowException, OverflowError, ValueError) as error:
                    raise BadRowError(
                        f"{path}: lines {chunk.first_number} onwards cannot form parquet "
                        f"columns: {error}"
                    ) from None
    try:
        return pyarrow.unify_schemas(schemas, promote_options="permissive") if schemas else None
    except pyarrow.ArrowException as error:
        raise BadRowError(f"the inputs' columns cannot form one parquet table: {error}") from None


class _Output:
    """One output file being written: JSONL bytes or parquet batches, to a temporary file."""

    def __init__(self, target: Path, stack: contextlib.ExitStack) -> None:
        self.target = target
        self.parquet = target.name.endswith(".parquet")
        self.temporary = stack.enter_context(files.atomic_output(target))
        self.stream: BackgroundWriter | None = None
        if not self.parquet:
            self.stream = BackgroundWriter(self.temporary.open("wb"))
            stack.callback(self.stream.close)
        self.writer: Any = None
        self.empty_schema: Any = None  # the columns of an output without rows
        self.rows = self.scored = 0
        self.digests = hashlib.sha256()  # of the input's chunks, for the manifest

    def write(self, output: Any, where: str) -> None:
        if self.stream is not None:
            self.stream.write(output)
            return
        if output.num_rows == 0:
            if self.empty_schema is None:
                self.empty_schema = output.schema
            return
        pyarrow = _parquet_module()
        if self.writer is None:
            self.writer = pyarrow.parquet.ParquetWriter(self.temporary, output.schema)
        schema = self.writer.schema
        extra = [name for name in output.schema.names if name not in schema.names]
        if extra:
            raise BadRowError(
                f"{where}: result column(s) {', '.join(extra)} are not in the rows before; a "
                "parquet file has one set of columns: write .jsonl"
            )
        try:
            self.writer.write_batch(conform(output, schema))
        except (pyarrow.ArrowException, ValueError) as error:
            raise BadRowError(f"{where}: cannot write to {self.target}: {error}") from None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        elif self.writer is not None:
            self.writer.close()
        else:
            pyarrow = _parquet_module()
            schema = self.empty_schema if self.empty_schema is not None else pyarrow.schema([])
            pyarrow.parquet.write_table(schema.empty_table(), self.temporary)


def _write_all(
    job: ScoreJob,
    the_plan: _Plan,
    results: Iterator[ChunkResult],
    stats: _Stats,
    failures: _Failures,
    progress: Progress | None,
    on_described: Callable[[Any], None] | None,
) -> None:
    """Write the results, in order, to their outputs, each output completed with its input's
    last chunk (with ``merge``, after the last input); count them; stop at the first bad row
    with ``on_error="fail"``."""
    output: _Output | None = None
    with contextlib.ExitStack() as file_stack:
        for result in results:
            index = result.file_index
            name = str(the_plan.inputs[index])
            unit = "row" if the_plan.formats[index] == ".parquet" else "line"
            target = the_plan.targets[index]
            if output is None and target is not None:
                output = _Output(target, file_stack)
            for failed in result.failed:
                if job.on_error == "fail":
                    raise BadRowError(
                        f"{name}: {unit} {failed.number}: {failed.failure.detail} (--on-error "
                        "skip goes on, listing bad rows in OUTPUT.failures.jsonl)"
                    )
                stats.reasons[failed.failure.reason] += 1
                if len(stats.examples) < 10:
                    example = {"file": name, unit: failed.number, "reason": failed.failure.detail}
                    stats.examples.append(example)
                failures.add(name, unit, failed)
            scored = result.rows - len(result.failed)
            stats.rows += result.rows
            stats.scored += scored
            stats.stringified += result.stringified
            stats.replaced |= result.replaced
            summary.merge(stats.counts, result.counts)
            stats.seconds["workers"] += result.seconds
            if output is not None:
                output.rows += result.rows
                output.scored += scored
                output.digests.update(result.digest)
                written = time.perf_counter()
                output.write(result.output, name)
                if result.last and not job.merge:
                    _finish(the_plan, index, output, file_stack)
                    output = None
                stats.seconds["write"] += time.perf_counter() - written
            if on_described is not None:
                for item in result.described:
                    on_described(item)
            if progress is not None:
                progress(result.rows)
        if output is not None:
            _finish(the_plan, None, output, file_stack)


def _finish(
    the_plan: _Plan, index: int | None, output: _Output, stack: contextlib.ExitStack
) -> None:
    """Close ``output``, rename it into place, and list it in the manifest as made from input
    ``index`` (none for a merged output)."""
    output.close()
    stack.close()
    if the_plan.manifest is not None and index is not None:
        source = the_plan.inputs[index]
        parquet = the_plan.formats[index] == ".parquet"
        digest = files.file_digest(source) if parquet else output.digests.hexdigest()
        entry = {"sha256": digest, "rows": output.rows, "scored": output.scored}
        the_plan.manifest.add(source, output.target, entry)


class _Failures:
    """The skipped rows and their reasons, as JSON lines in ``OUTPUT.failures.jsonl``; written
    through a temporary file when the first one arrives; a stale file removed when none does."""

    def __init__(self, path: Path | None, stack: contextlib.ExitStack) -> None:
        self.path, self.stack = path, stack
        self.stream: IO[bytes] | None = None

    def add(self, name: str, unit: str, failed: FailedRow) -> None:
        if self.path is None:
            return
        if self.stream is None:
            temporary = self.stack.enter_context(files.atomic_output(self.path))
            self.stream = self.stack.enter_context(temporary.open("wb"))
        entry = {
            "file": name,
            unit: failed.number,
            "reason": failed.failure.reason,
            "detail": failed.failure.detail,
            "row": failed.row,
        }
        try:
            line = orjson.dumps(entry, default=repr, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # a lone surrogate in a detail: the standard library escapes it
            line = json.dumps(entry, default=repr).encode()
        self.stream.write(line + b"\n")

    def finish(self) -> None:
        if self.path is not None and self.stream is None:
            self.path.unlink(missing_ok=True)
