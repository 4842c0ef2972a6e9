"""Gzipped JSON lines (``.jsonl.gz``): :mod:`.jsonl`, compressed.

Each chunk's output is compressed in its worker as one gzip member (level 6, no timestamp), so
compression scales with the workers and the file is the same for every run; a gzip reader reads
the members as one stream.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, cast

from reward_plugins.rescore.formats.jsonl import JsonlFormat


class JsonlGzFormat(JsonlFormat):
    """``.jsonl.gz``: JSON lines in gzip."""

    suffix = ".jsonl.gz"

    def open(self, path: Path) -> IO[bytes]:
        return cast(IO[bytes], gzip.open(path, "rb"))

    def encode(self, data: bytes) -> bytes:
        return gzip.compress(data, compresslevel=6, mtime=0)
