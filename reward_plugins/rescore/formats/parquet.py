"""Parquet (``.parquet``): verl's dataset format, read and written with pyarrow (an extra).

A payload is a record batch of :data:`PARQUET_CHUNK_ROWS` rows. A parquet output made from one
parquet input keeps the input's batches, with the ``reward_*`` columns appended; one made from
JSON lines, or from several inputs (``--merge``), has the union of their columns, computed
before any work (:meth:`ParquetFormat.output_schema`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from reward_plugins.rescore.errors import BadRowError, DataError, RescoreError
from reward_plugins.rescore.formats.base import (
    Chunk,
    ChunkWriter,
    Format,
    OutputFile,
    Record,
    file_digest,
    read_chunks,
)
from reward_plugins.runtime.rows import RowFailure

PARQUET_CHUNK_ROWS = 1024
PARQUET_INSTALL_HINT = 'pip install "reward-plugins[parquet]"'


def parquet_module() -> Any:
    """pyarrow, with its parquet module loaded.

    Raises:
        RescoreError: pyarrow is not installed (the message says how to install it).
    """
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise RescoreError(
            f"reading and writing parquet needs pyarrow: {PARQUET_INSTALL_HINT}"
        ) from None
    return pyarrow


def conform(batch: Any, schema: Any) -> Any:
    """``batch`` with exactly the fields of ``schema``: cast, and null where it has none."""
    pyarrow = parquet_module()
    arrays = []
    for field_ in schema:
        if field_.name in batch.schema.names:
            arrays.append(batch.column(field_.name).cast(field_.type))
        else:
            arrays.append(pyarrow.nulls(batch.num_rows, field_.type))
    return pyarrow.RecordBatch.from_arrays(arrays, schema=schema)


def _unwritable(column: str) -> RowFailure:
    return RowFailure(
        "text parquet cannot hold",
        f"column {column!r} holds a lone surrogate (a \\udcxx escape), which the UTF-8 strings "
        "of parquet cannot hold: write .jsonl, which keeps it",
    )


# ---------------------------------------------------------------------------- the schema


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


def _check_kinds(
    record: Mapping[str, Any], first: dict[str, tuple[str, str]], where: str, number: int
) -> None:
    """Remember the kind of each column of ``record`` (row ``number`` of ``where``) where it is
    first known (``first``: column -> (kind, row)).

    Raises:
        BadRowError: a column whose values have different kinds in two rows.
    """
    for key, value in record.items():
        kind = _kind(value)
        seen = first.get(key)
        if seen is None or seen[0] == "null":
            first[key] = (kind, f"{where} {number}")
        elif kind not in ("null", seen[0]):
            raise BadRowError(
                f"column {key!r} has {seen[0]} values ({seen[1]}) and {kind} values "
                f"({where} {number}); a parquet column has one type: write "
                ".jsonl, or make the column consistent"
            )


def _chunk_schema(path: Path, fmt: Format, chunk: Chunk, first: dict[str, tuple[str, str]]) -> Any:
    """The parquet schema of the rows of ``chunk`` (of the input ``path``, of a format other
    than parquet) that a worker will write, ``None`` without such rows."""
    pyarrow = parquet_module()
    records = []
    for record in fmt.records(chunk.payload, chunk.first_number):
        parsed = record.parsed
        if not isinstance(parsed, dict) or fmt.unwritable_text(record.raw, parsed):
            continue  # a bad row, which the worker names
        records.append(parsed)
        _check_kinds(parsed, first, f"{path}: {fmt.unit}", record.number)
    if not records:
        return None
    try:
        return pyarrow.schema(pyarrow.array(records).type)
    except (pyarrow.ArrowException, OverflowError, ValueError) as error:
        raise BadRowError(
            f"{path}: {fmt.unit}s {chunk.first_number} onwards cannot form parquet columns: {error}"
        ) from None


# ------------------------------------------------------------------------------ writing


class _Batch:
    """The parquet output of one chunk: the input batch's rows (of a parquet input) or the
    parsed rows, with the ``reward_*`` columns appended."""

    def __init__(self, source: Format, payload: Any, schema: Any, where: str) -> None:
        self.source, self.payload, self.schema, self.where = source, payload, schema, where
        self.kept: list[tuple[int, Mapping[str, Any], Mapping[str, Any]]] = []

    def refuse(self, raw: Any, record: Mapping[str, Any]) -> RowFailure | None:
        column = self.source.unwritable_text(raw, record)
        return None if column is None else _unwritable(column)

    def add(
        self, position: int, raw: Any, record: Mapping[str, Any], rewards: Mapping[str, Any]
    ) -> None:
        self.kept.append((position, record, rewards))

    def finish(self) -> tuple[Any, set[str]]:
        pyarrow = parquet_module()
        replaced: set[str] = set()
        if isinstance(self.source, ParquetFormat):
            batch = self.payload
            if len(self.kept) != batch.num_rows:
                positions = pyarrow.array([position for position, *_ in self.kept], pyarrow.int64())
                batch = batch.take(positions)
            if self.schema is not None:
                batch = conform(batch, self.schema)
            names = self.payload.schema.names
            replaced.update(key for key in (self.kept[0][2] if self.kept else ()) if key in names)
        else:
            try:
                batch = pyarrow.RecordBatch.from_pylist(
                    [record for _, record, _ in self.kept], schema=self.schema
                )
            except (pyarrow.ArrowException, TypeError, ValueError, OverflowError) as error:
                raise DataError(f"{self.where} cannot form the parquet columns: {error}") from None
        rewards: dict[str, list[Any]] = {}
        for _, _, result in self.kept:
            for key, value in result.items():
                rewards.setdefault(key, []).append(value)
        for key, values in rewards.items():
            if key in batch.schema.names:
                batch = batch.drop_columns([key])
            batch = batch.append_column(key, pyarrow.array(values))
        return batch, replaced


class _ParquetFile:
    """A parquet output: one writer, opened with the first batch's columns; an output without
    rows still gets the columns of its input."""

    def __init__(self, temporary: Path, target: Path) -> None:
        self.temporary, self.target = temporary, target
        self.writer: Any = None
        self.empty_schema: Any = None  # the columns of an output without rows

    def write(self, output: Any, where: str) -> None:
        if output.num_rows == 0:
            if self.empty_schema is None:
                self.empty_schema = output.schema
            return
        pyarrow = parquet_module()
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
        if self.writer is not None:
            self.writer.close()
        else:
            pyarrow = parquet_module()
            schema = self.empty_schema if self.empty_schema is not None else pyarrow.schema([])
            pyarrow.parquet.write_table(schema.empty_table(), self.temporary)

    def abandon(self) -> None:
        pass


# --------------------------------------------------------------------------------- format


class ParquetFormat(Format):
    """``.parquet``: read in record batches; a parquet input is fingerprinted by its bytes."""

    suffix = ".parquet"
    lines = False
    whole_rows = False

    def require(self) -> None:
        parquet_module()

    def payloads(self, path: Path) -> Iterator[Any]:
        pyarrow = parquet_module()
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

    def count(self, payload: Any) -> int:
        return int(payload.num_rows)

    def records(
        self, payload: Any, first_number: int, columns: Sequence[str] | None = None
    ) -> Iterator[Record]:
        if columns is not None:
            names = set(payload.schema.names)
            payload = payload.select([name for name in columns if name in names])
        for position, record in enumerate(payload.to_pylist()):
            yield Record(first_number + position, position, record, record)

    def fingerprint(self, path: Path) -> str:
        """The sha256 of the file."""
        return file_digest(path)

    def fingerprint_read(self, path: Path, digests: Any) -> str:
        return self.fingerprint(path)

    def check_json_form(self, path: Path) -> None:
        """Refuse columns JSON has no exact form for: bytes, decimals, durations, intervals."""
        pyarrow = parquet_module()
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
            fields = range(data_type.num_fields)
            return any(without_json_form(data_type.field(i).type) for i in fields)

        for field_ in pyarrow.parquet.read_schema(path):
            if without_json_form(field_.type):
                raise RescoreError(
                    f"input {path}: column {field_.name!r} holds {field_.type} values, which "
                    "JSONL cannot hold exactly; write .parquet"
                )

    def output_schema(self, feeders: Sequence[tuple[Path, Format]]) -> Any:
        """The input columns of a parquet output made of several inputs (``--merge``) or of
        another format: every key of every row (a first pass over those inputs) and every
        parquet input's columns, in order of first appearance; ``None`` for an output made from
        one parquet input (its batches are written as they are).

        Raises:
            BadRowError: a column whose values have different types in two rows.
        """
        if len(feeders) == 1 and isinstance(feeders[0][1], ParquetFormat):
            return None
        pyarrow = parquet_module()
        schemas = []
        first: dict[str, tuple[str, str]] = {}  # column -> (kind, where)
        for path, fmt in feeders:
            if isinstance(fmt, ParquetFormat):
                schemas.append(pyarrow.parquet.read_schema(path))
                continue
            for chunk in read_chunks(path, 0, fmt):
                schema = _chunk_schema(path, fmt, chunk, first)
                if schema is not None:
                    schemas.append(schema)
        try:
            return pyarrow.unify_schemas(schemas, promote_options="permissive") if schemas else None
        except pyarrow.ArrowException as error:
            raise BadRowError(
                f"the inputs' columns cannot form one parquet table: {error}"
            ) from None

    def chunk_writer(self, source: Format, payload: Any, schema: Any, where: str) -> ChunkWriter:
        return _Batch(source, payload, schema, where)

    def open_output(self, temporary: Path, target: Path) -> OutputFile:
        return _ParquetFile(temporary, target)
