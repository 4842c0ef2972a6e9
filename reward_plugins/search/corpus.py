"""Reading a retrieval corpus in Search-R1's format, one checked line at a time.

A corpus is JSON Lines, plain or gzip-compressed (``.gz``), one document per line::

    {"id": "0", "contents": "\\"Title\\"\\ntext of the passage"}

as in Search-R1's ``wiki-18.jsonl`` (github.com/PeterGriffinJin/Search-R1, README, "Retriever").
``id`` and ``contents`` must be strings; other fields are kept and returned with the document.
:func:`read_corpus` streams a corpus with bounded memory: every line is read with a size cap,
checked (UTF-8, strict JSON with no lone surrogate escape, a JSON object, the two fields, an id
not seen before) and either yielded or, when it fails, refused with a :class:`CorpusError` naming
the file and line, or skipped and counted (``bad_lines="skip"``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

import orjson

from reward_plugins.errors import InvalidInput

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

BAD_LINE_POLICIES = ("refuse", "skip")
"""What :func:`read_corpus` does with a bad line: raise :class:`CorpusError`, or skip it."""

MAX_LINE_BYTES = 1 << 20
"""A corpus line longer than this (1 MiB; a wiki-18 passage is about 700 bytes) is a bad line."""

SHOWN_BAD_LINES = 10
"""How many skipped lines :class:`CorpusStats` keeps (and the log names) one by one."""

ID_BATCH = 16384


class CorpusError(InvalidInput):
    """A corpus file that cannot be read, or a line of it that is not a document."""


class Passage(NamedTuple):
    """One checked corpus line: its 1-based ``line`` number, its ``id`` and ``contents``, and
    ``raw``: the line's JSON text (UTF-8 bytes, no line break), returned as the document."""

    line: int
    id: str
    contents: str
    raw: bytes


@dataclass
class CorpusStats:
    """What a pass of :func:`read_corpus` saw; complete once the iterator is exhausted.

    ``crc32`` is the CRC-32 of the file's bytes as stored (compressed for ``.gz``) and
    ``bytes_read`` how many of them have been read so far (for a progress bar).
    """

    lines: int = 0
    bytes_read: int = 0
    documents: int = 0
    skipped: int = 0
    skipped_lines: list[str] = field(default_factory=list)
    crc32: int = 0


def sample_corpus_path() -> Path:
    """The installed path of the shipped sample corpus (228 short encyclopedia passages).

    Example:
        >>> sample_corpus_path().name
        'sample_corpus.jsonl'
    """
    return Path(str(resources.files("reward_plugins") / "data" / "corpus" / "sample_corpus.jsonl"))


def check_line(raw: bytes) -> tuple[str, str]:
    """``(id, contents)`` of one corpus line's bytes, or :class:`CorpusError` saying why not.

    Example:
        >>> check_line(b'{"id": "7", "contents": "Paris\\\\nThe capital."}')
        ('7', 'Paris\\nThe capital.')
        >>> check_line(b'{"id": "7", "contents": "\\\\ud800"}')  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        reward_plugins.search.corpus.CorpusError: a lone surrogate escape, not text (...)
    """
    try:
        row: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise CorpusError(_why_not_json(raw, error)) from None
    if not isinstance(row, dict):
        raise CorpusError(f"a document is a JSON object, got {_json_type(row)}")
    for name in ("id", "contents"):
        if name not in row:
            raise CorpusError(f"the document has no {name!r} field")
        if not isinstance(row[name], str):
            raise CorpusError(f"the {name!r} field must be a string, got {_json_type(row[name])}")
    return row["id"], row["contents"]


def _why_not_json(raw: bytes, error: orjson.JSONDecodeError) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"not UTF-8 (byte 0x{raw[bad.start]:02x} at byte {bad.start + 1})"
    if "surrogate" in str(error):
        return f"a lone surrogate escape, not text ({error})"
    return f"not JSON ({error})"


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def read_corpus(
    path: str | Path, bad_lines: str = "refuse", stats: CorpusStats | None = None
) -> Iterator[Passage]:
    """The documents of a JSON Lines corpus (``.gz``: gzip), streamed; blank lines are skipped.

    Args:
        path: the corpus file.
        bad_lines: ``"refuse"``: the first bad line raises :class:`CorpusError` naming the file,
            the line number and the reason; ``"skip"``: bad lines are logged (the first
            :data:`SHOWN_BAD_LINES`), counted in ``stats`` and left out.
        stats: filled in as the corpus is read (counts, skipped lines, the file's CRC-32).

    Raises:
        CorpusError: a bad line (``refuse``), a corrupt gzip stream, or no document at all.
        OSError: the file cannot be opened or read.

    Ids are compared by a 128-bit hash (BLAKE2b), 16 bytes per document, so a repeated id is
    found without holding the ids in memory; documents are checked and yielded in batches of
    :data:`ID_BATCH` lines.
    """
    if bad_lines not in BAD_LINE_POLICIES:
        raise InvalidInput(f"bad_lines: expected one of {BAD_LINE_POLICIES}, got {bad_lines!r}")
    yield from _CorpusReader(path, bad_lines, stats if stats is not None else CorpusStats()).read()


class _CorpusReader:
    """One pass of :func:`read_corpus` over ``path``: its policy, its stats, the ids seen."""

    def __init__(self, path: str | Path, bad_lines: str, stats: CorpusStats) -> None:
        self.path, self.bad_lines, self.stats = path, bad_lines, stats
        self.seen = _IdSet()

    def read(self) -> Iterator[Passage]:
        pending: list[Passage] = []
        with _open(Path(self.path), self.stats) as lines:
            for number, raw in _lines(lines, self.path):
                self.stats.lines = number
                try:
                    pending.append(_passage(number, raw))
                except CorpusError as reason:
                    error = CorpusError(f"{self.path} line {number}: {reason}")
                    if self.bad_lines == "refuse":  # an earlier repeated id is the first bad line
                        yield from self._unique(pending)
                        pending = []
                    self._refuse_or_skip(error)
                    continue
                if len(pending) >= ID_BATCH:
                    yield from self._unique(pending)
                    pending = []
            yield from self._unique(pending)
        if not self.stats.documents:
            raise CorpusError(f"{self.path}: the corpus has no documents")

    def _refuse_or_skip(self, error: CorpusError) -> None:
        if self.bad_lines == "refuse":
            raise error
        self.stats.skipped += 1
        if len(self.stats.skipped_lines) < SHOWN_BAD_LINES:
            self.stats.skipped_lines.append(str(error))
            logger.warning("skipped %s", error)

    def _unique(self, passages: list[Passage]) -> Iterator[Passage]:
        """``passages`` less those whose id came before (refused, or skipped)."""
        repeated = self.seen.add([passage.id for passage in passages])
        for position, passage in enumerate(passages):
            if position in repeated:
                if self.bad_lines == "refuse":
                    raise _repeat_error(self.path, passage)
                self._refuse_or_skip(
                    CorpusError(
                        f"{self.path} line {passage.line}: id {passage.id!r} repeats an earlier "
                        "line"
                    )
                )
                continue
            self.stats.documents += 1
            yield passage


def _passage(number: int, raw: bytes | None) -> Passage:
    """Line ``number`` as a passage.

    Raises:
        CorpusError: the reason alone (the caller names the file and line).
    """
    if raw is None:
        raise CorpusError(f"longer than {MAX_LINE_BYTES} bytes")
    identifier, contents = check_line(raw)
    return Passage(number, identifier, contents, raw)


def _lines(lines: BinaryIO, path: str | Path) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, stripped line)`` of the non-blank lines; ``None`` for an overlong one."""
    number = 0
    while True:
        try:
            raw = lines.readline(MAX_LINE_BYTES + 1)
            if len(raw) > MAX_LINE_BYTES:
                while raw and not raw.endswith(b"\n"):
                    raw = lines.readline(MAX_LINE_BYTES)
                number += 1
                yield number, None
                continue
        except (EOFError, zlib.error, gzip.BadGzipFile) as error:
            raise CorpusError(f"{path}: not a readable gzip file ({error})") from None
        if not raw:
            return
        number += 1
        raw = raw.strip()
        if raw:
            yield number, raw


def _repeat_error(path: str | Path, repeat: Passage) -> CorpusError:
    """The error of a repeated id, naming the line of its first occurrence (a second pass)."""
    for passage in read_corpus(path, bad_lines="skip"):
        if passage.id == repeat.id and passage.line < repeat.line:
            return CorpusError(
                f"{path} line {repeat.line}: id {repeat.id!r} repeats line {passage.line}"
            )
        if passage.line >= repeat.line:
            break
    return CorpusError(f"{path} line {repeat.line}: id {repeat.id!r} repeats an earlier line")


class _IdSet:
    """128-bit hashes (BLAKE2b) of the ids seen so far, as two uint64 arrays per run, each run
    sorted by its first half; runs are merged as they grow (O(n log n) in all)."""

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, identifiers: Sequence[str]) -> set[int]:
        """Record ``identifiers``; the positions of those seen before (or earlier in them)."""
        import numpy as np

        repeated: set[int] = set()
        fresh: dict[bytes, int] = {}
        for position, identifier in enumerate(identifiers):
            key = hashlib.blake2b(identifier.encode(), digest_size=16).digest()
            if key in fresh:
                repeated.add(position)
            else:
                fresh[key] = position
        if not fresh:
            return repeated
        halves = np.frombuffer(b"".join(fresh), dtype=np.uint64).reshape(-1, 2)
        high, low = halves[:, 0].copy(), halves[:, 1].copy()
        positions = np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh))
        new = np.ones(len(high), dtype=bool)
        for run_high, run_low in self._runs:
            start = run_high.searchsorted(high)
            end = run_high.searchsorted(high, side="right")
            for candidate in np.flatnonzero(end > start):  # first halves equal: compare all
                if low[candidate] in run_low[start[candidate] : end[candidate]]:
                    new[candidate] = False
        repeated.update(positions[~new].tolist())
        if new.any():
            run = (high[new], low[new])
            while self._runs and len(self._runs[-1][0]) <= len(run[0]):
                older = self._runs.pop()
                run = (np.concatenate([older[0], run[0]]), np.concatenate([older[1], run[1]]))
            order = np.argsort(run[0], kind="stable")  # sorted pieces: timsort merges them
            self._runs.append((run[0][order], run[1][order]))
        return repeated


class _CrcReader(io.RawIOBase):
    """A raw binary stream that computes the CRC-32 of every byte read through it."""

    def __init__(self, stream: BinaryIO, stats: CorpusStats) -> None:
        self._stream = stream
        self._stats = stats

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._stream.readinto(buffer)  # type: ignore[attr-defined]
        if count:
            self._stats.bytes_read += count
            self._stats.crc32 = zlib.crc32(memoryview(buffer)[:count], self._stats.crc32)
        return int(count or 0)

    def close(self) -> None:
        self._stream.close()
        super().close()


def _open(path: Path, stats: CorpusStats) -> BinaryIO:
    """The decompressed bytes of ``path`` (gzip when its name ends in ``.gz``), buffered."""
    raw = _CrcReader(path.open("rb", buffering=0), stats)
    buffered = io.BufferedReader(raw, buffer_size=1 << 20)
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=buffered, mode="rb")  # type: ignore[return-value]
    return buffered
