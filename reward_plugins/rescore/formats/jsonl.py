"""JSON lines (``.jsonl``): one JSON object per line, verl's rollout dump format.

A payload is a block of whole lines. JSONL rows are written back by splicing the ``reward_*``
columns into the original line: the input's own bytes (number formats, escapes, key order) are
kept exactly. Rows read from another format are written with orjson.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from reward_plugins.rescore.background import BackgroundWriter
from reward_plugins.rescore.formats.base import ChunkWriter, Format, OutputFile, Record
from reward_plugins.runtime.rows import RowFailure

JSONL_CHUNK_BYTES = 1 << 21
"""Bytes of JSONL per chunk (whole lines; a longer line makes a longer chunk)."""


# ---------------------------------------------------------------------------------- lines


def parse_line(line: bytes) -> dict[str, Any] | RowFailure:
    """One JSONL line as a dict, or why it is not one.

    orjson parses almost every line; what it refuses and the standard library accepts (``NaN``
    tokens, lone surrogate escapes, integers beyond 64 bits) is parsed by :mod:`json`. A line
    nested deeper than the interpreter's recursion limit is a failure, not a crash.
    """
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as error:  # ValueError: also UnicodeDecodeError
            detail = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            return RowFailure("unparsable JSON", f"unparsable JSON: {detail}")
    if not isinstance(record, dict):
        return RowFailure(
            "unparsable JSON", f"a row must be a JSON object, got {type(record).__name__}"
        )
    return record


_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_column(line: bytes, record: Mapping[str, Any]) -> str | None:
    """The first column of ``record`` (parsed from the JSONL ``line``) whose name or text, at
    any depth, holds a lone surrogate, or ``None``. Only a JSON escape (``\\udcxx``) brings one,
    so a line without such an escape is not searched."""
    if not _ESCAPED_SURROGATE.search(line):
        return None
    for name, value in record.items():
        pending = [name, value]
        while pending:
            item = pending.pop()
            if isinstance(item, str):
                if _SURROGATE.search(item):
                    return name
            elif isinstance(item, list):
                pending += item
            elif isinstance(item, dict):
                pending += [*item, *item.values()]
    return None


def jsonl_lines(payload: bytes, first_number: int) -> Iterator[tuple[int, bytes]]:
    """``(1-based line number, line)`` of each non-blank line of ``payload``."""
    for number, line in enumerate(payload.split(b"\n"), start=first_number):
        if line and not line.isspace():  # isspace stops at the first other byte; strip copies
            yield number, line


def spliced_line(line: bytes, record: Mapping[str, Any], rewards: Mapping[str, Any]) -> bytes:
    """The input ``line`` with the ``rewards`` columns added, without its own bytes re-encoded.

    A row that already has one of the columns (a re-scored output) is re-serialized with the
    standard library, which round-trips what orjson would not (integers beyond 64 bits,
    ``NaN``); a lone surrogate is then written as its escape.
    """
    if not record.keys().isdisjoint(rewards):
        merged = {**json.loads(line), **rewards}
        try:
            text = json.dumps(merged, ensure_ascii=False)
            text.encode()
        except UnicodeEncodeError:
            text = json.dumps(merged, ensure_ascii=True)
        return text.encode()
    end = len(line.rstrip()) - 1  # the closing brace
    added = orjson.dumps(rewards)
    if len(added) == 2:  # no reward columns
        return line[: end + 1]
    return b"".join((memoryview(line)[:end], b"," if record else b"", memoryview(added)[1:]))


def dumps_record(record: Mapping[str, Any]) -> bytes:
    """One row read from another format (parquet), as a JSON line (without the newline).

    Raises:
        TypeError: a value JSON cannot hold (the caller refuses binary columns up front).
    """
    return orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS)


# --------------------------------------------------------------------------------- format


class _Lines:
    """The JSONL output of one chunk: each input line spliced, each other row serialized."""

    def __init__(self, fmt: JsonlFormat, source: Format) -> None:
        self.fmt, self.splice = fmt, source.lines
        self.lines: list[bytes] = []

    def refuse(self, raw: Any, record: Mapping[str, Any]) -> RowFailure | None:
        return None

    def add(
        self, position: int, raw: Any, record: Mapping[str, Any], rewards: Mapping[str, Any]
    ) -> None:
        if self.splice:
            self.lines.append(spliced_line(raw, record, rewards))
        else:
            self.lines.append(dumps_record({**record, **rewards}))

    def finish(self) -> tuple[Any, set[str]]:
        return self.fmt.encode(b"\n".join([*self.lines, b""]) if self.lines else b""), set()


class _LinesFile:
    """A JSONL output: the chunks' bytes, written by a thread."""

    def __init__(self, temporary: Path) -> None:
        self.stream = BackgroundWriter(temporary.open("wb"))

    def write(self, output: Any, where: str) -> None:
        self.stream.write(output)

    def close(self) -> None:
        self.stream.close()

    def abandon(self) -> None:
        self.stream.close()


class JsonlFormat(Format):
    """``.jsonl``: JSON lines, read in blocks of :data:`JSONL_CHUNK_BYTES` whole lines."""

    suffix = ".jsonl"
    lines = True
    whole_rows = True

    def open(self, path: Path) -> IO[bytes]:
        """A binary stream of the file's lines."""
        return path.open("rb")

    def encode(self, data: bytes) -> bytes:
        """A chunk's lines as the file holds them."""
        return data

    def payloads(self, path: Path) -> Iterator[bytes]:
        with self.open(path) as stream:
            empty = True
            # A block, completed to the end of its last line: one copy of the bytes at most.
            while payload := stream.read(JSONL_CHUNK_BYTES) + stream.readline():
                empty = False
                yield payload
            if empty:
                yield b""

    def count(self, payload: bytes) -> int:
        return payload.count(b"\n")

    def digest(self, payload: bytes) -> bytes:
        """The CRC-32 of the payload's bytes."""
        return zlib.crc32(payload).to_bytes(4, "big")

    def records(
        self, payload: bytes, first_number: int, columns: Sequence[str] | None = None
    ) -> Iterator[Record]:
        for position, (number, line) in enumerate(jsonl_lines(payload, first_number)):
            yield Record(number, position, line, parse_line(line))

    def unwritable_text(self, raw: bytes, record: Mapping[str, Any]) -> str | None:
        return lone_surrogate_column(raw, record)

    def check_input(self, path: Path, source: Format) -> None:
        source.check_json_form(path)

    def chunk_writer(self, source: Format, payload: Any, schema: Any, where: str) -> ChunkWriter:
        return _Lines(self, source)

    def open_output(self, temporary: Path, target: Path) -> OutputFile:
        return _LinesFile(temporary)
