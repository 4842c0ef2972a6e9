"""The file formats the engine reads and writes, one module each, in one table.

:data:`FORMATS` maps each file name ending to its :class:`Format`; nothing else in the engine
knows a suffix. Adding a format is one module (a :class:`Format` subclass: how its files are
read in chunks, how a chunk's rows are parsed, how scored rows are written) and one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping

from reward_plugins.rescore.formats.base import (
    Chunk,
    ChunkWriter,
    Format,
    OutputFile,
    Record,
    read_chunks,
    rows_of,
)
from reward_plugins.rescore.formats.jsonl import JsonlFormat
from reward_plugins.rescore.formats.jsonl_gz import JsonlGzFormat
from reward_plugins.rescore.formats.parquet import ParquetFormat

FORMATS: Mapping[str, Format] = {
    fmt.suffix: fmt for fmt in (JsonlFormat(), JsonlGzFormat(), ParquetFormat())
}
"""Every format, by its file name ending (``".jsonl"``, ``".jsonl.gz"``, ``".parquet"``)."""

SUFFIXES: tuple[str, ...] = tuple(FORMATS)
"""The file name endings of :data:`FORMATS`, in its order (for ``str.endswith``)."""


def format_named(name: str) -> Format | None:
    """The format of a file called ``name`` (the longest matching ending), or ``None``."""
    endings = [suffix for suffix in FORMATS if name.endswith(suffix)]
    return FORMATS[max(endings, key=len)] if endings else None


__all__ = [
    "FORMATS",
    "SUFFIXES",
    "Chunk",
    "ChunkWriter",
    "Format",
    "OutputFile",
    "Record",
    "format_named",
    "read_chunks",
    "rows_of",
]
