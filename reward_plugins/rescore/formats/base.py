"""What a file format is to the engine: how its files are read in chunks, how each chunk's rows
are parsed, and how scored rows are written back.

An input file is read as raw *payloads* (whole JSONL lines, parquet record batches) in the
parent process; a worker parses a payload into :class:`Record` s, scores them, and hands the
scored rows to the output format's :class:`ChunkWriter`, whose result the parent writes, in
input order, through the output format's :class:`OutputFile`.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, Protocol

from reward_plugins.rescore.errors import RescoreError
from reward_plugins.runtime.rows import RowFailure


class Chunk(NamedTuple):
    """Consecutive rows of one input: one payload of its format."""

    file_index: int
    first_number: int  # 1-based line (JSONL) or row (parquet) of the chunk's first row
    payload: Any
    last: bool  # the file's last chunk
    digest: bytes  # the format's digest of the payload, for the manifest (may be empty)


class Record(NamedTuple):
    """One row of a payload: its 1-based ``number`` in the file (line or row), its ``position``
    among the payload's rows, its ``raw`` form (a JSONL line's bytes, a parquet row's values),
    and the row ``parsed`` (or why it is not a row)."""

    number: int
    position: int
    raw: Any
    parsed: dict[str, Any] | RowFailure


class ChunkWriter(Protocol):
    """Turns the scored rows of one chunk into the chunk's output (in a worker)."""

    def refuse(self, raw: Any, record: Mapping[str, Any]) -> RowFailure | None:
        """Why the output cannot hold this row (checked before it is scored), or ``None``."""

    def add(
        self, position: int, raw: Any, record: Mapping[str, Any], rewards: Mapping[str, Any]
    ) -> None:
        """Add a scored row: its :class:`Record` fields and its ``reward_*`` columns."""

    def finish(self) -> tuple[Any, set[str]]:
        """The chunk's output (picklable) and the input columns a result column replaced that
        the parsed records did not show (columns a reader left out)."""


class OutputFile(Protocol):
    """One output file being written, in the parent process, to a temporary path."""

    def write(self, output: Any, where: str) -> None:
        """Append one chunk's output; ``where`` names the input rows for an error.

        Raises:
            BadRowError: the rows cannot join the file (another set of columns).
        """

    def close(self) -> None:
        """Complete the file (called once, before it is renamed into place)."""

    def abandon(self) -> None:
        """Release what the file holds (called on every exit, after :meth:`close` too)."""


class _NoOutput:
    """The :class:`ChunkWriter` of an input without output: keeps nothing."""

    def refuse(self, raw: Any, record: Mapping[str, Any]) -> RowFailure | None:
        return None

    def add(
        self, position: int, raw: Any, record: Mapping[str, Any], rewards: Mapping[str, Any]
    ) -> None:
        pass

    def finish(self) -> tuple[Any, set[str]]:
        return None, set()


NO_OUTPUT: ChunkWriter = _NoOutput()


class Format(ABC):
    """One file format, known by its :attr:`suffix`; the engine holds one instance of each in
    :data:`reward_plugins.rescore.formats.FORMATS`.

    A format reads (:meth:`payloads`, :meth:`records`) and writes (:meth:`chunk_writer`,
    :meth:`open_output`); the other methods have defaults that suit a format needing no extra
    dependency, no check and no schema.
    """

    suffix: ClassVar[str]
    """The file name ending, with its dot (``".jsonl.gz"``)."""

    lines: ClassVar[bool]
    """Rows are JSON lines: a row's number is its line's, its raw form the line's bytes."""

    whole_rows: ClassVar[bool]
    """The output is built from every column of each parsed row (a reader that can read only
    some columns reads them all)."""

    @property
    def unit(self) -> str:
        """What a row number counts, in messages and the failures file: ``line`` or ``row``."""
        return "line" if self.lines else "row"

    def __repr__(self) -> str:
        return f"<format {self.suffix}>"

    def require(self) -> None:
        """Check, before any work, that what the format needs is installed.

        Raises:
            RescoreError: it is not (the message says how to install it).
        """
        return None  # needs nothing beyond the package's own dependencies

    # ------------------------------------------------------------------------------ reading

    @abstractmethod
    def payloads(self, path: Path) -> Iterator[Any]:
        """The raw chunks of ``path``, at least one (an empty payload for an empty file).

        Raises:
            RescoreError: the file is not of this format.
            OSError, EOFError: the file cannot be read (the caller names it).
        """

    @abstractmethod
    def count(self, payload: Any) -> int:
        """How far the row numbers advance over ``payload`` (lines or rows)."""

    def digest(self, payload: Any) -> bytes:
        """A digest of ``payload`` for the manifest (empty: :meth:`fingerprint_read` reads the
        file itself)."""
        return b""

    @abstractmethod
    def records(
        self, payload: Any, first_number: int, columns: Sequence[str] | None = None
    ) -> Iterator[Record]:
        """The rows of ``payload``, parsed, in order. ``columns`` (top-level names) are those
        the caller reads, when it needs no other; a format may then parse only those."""

    def fingerprint(self, path: Path) -> str:
        """The hash of an input in a manifest: by default, the sha256 of its payloads' digests
        (computed as the chunks are read, at 3 GB/s: any change to a chunk shows but for a
        chance of 2**-32)."""
        digests = hashlib.sha256()
        for chunk in read_chunks(path, 0, self):
            digests.update(chunk.digest)
        return self.fingerprint_read(path, digests)

    def fingerprint_read(self, path: Path, digests: Any) -> str:
        """:meth:`fingerprint` of ``path`` whose payloads' digests were just fed to the sha256
        ``digests``."""
        return str(digests.hexdigest())

    def check_json_form(self, path: Path) -> None:
        """Refuse, before any work, an input whose values JSON has no exact form for.

        Raises:
            RescoreError: naming the column and its type.
        """
        return None  # every value has one

    def unwritable_text(self, raw: Any, record: Mapping[str, Any]) -> str | None:
        """The first column of a parsed row whose text a UTF-8 format cannot hold (a lone
        surrogate), or ``None``."""
        return None

    # ------------------------------------------------------------------------------ writing

    def check_input(self, path: Path, source: Format) -> None:
        """Refuse, before any work, an input (of format ``source``) this output cannot hold.

        Raises:
            RescoreError: naming the input and why.
        """
        return None  # holds every input

    def output_schema(self, feeders: Sequence[tuple[Path, Format]]) -> Any:
        """What the chunk writers of one output fed by ``feeders`` (its inputs, in order) need
        to agree on, computed once before any work (picklable); ``None`` when nothing."""
        return None

    @abstractmethod
    def chunk_writer(self, source: Format, payload: Any, schema: Any, where: str) -> ChunkWriter:
        """A writer of one chunk's output, for a ``payload`` of the format ``source``, with the
        :meth:`output_schema`; ``where`` names the chunk's rows for an error."""

    @abstractmethod
    def open_output(self, temporary: Path, target: Path) -> OutputFile:
        """The output file written to ``temporary`` (renamed onto ``target`` when complete)."""


def read_chunks(path: Path, file_index: int, fmt: Format) -> Iterator[Chunk]:
    """The chunks of one input file, the last one marked; an empty file gives one empty chunk,
    so that its output is written too.

    Raises:
        RescoreError: the file cannot be read (not of its format, not gzip, an I/O error).
    """
    number, previous = 1, None
    try:
        for payload in fmt.payloads(path):
            if previous is not None:
                yield Chunk(file_index, number, previous, False, fmt.digest(previous))
                number += fmt.count(previous)
            previous = payload
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
        raise RescoreError(f"input {path}: cannot read: {error}") from None
    yield Chunk(file_index, number, previous, True, fmt.digest(previous))


def rows_of(path: Path, fmt: Format) -> Iterator[tuple[int, dict[str, Any] | RowFailure]]:
    """``(number, parsed row)`` of every row of ``path``, in order.

    Raises:
        RescoreError: the file cannot be read.
    """
    for chunk in read_chunks(path, 0, fmt):
        for record in fmt.records(chunk.payload, chunk.first_number):
            yield record.number, record.parsed


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes, hex."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()
