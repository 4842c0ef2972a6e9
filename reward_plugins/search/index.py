"""An on-disk BM25 index of a corpus, built once and memory-mapped to serve (tantivy).

:func:`build_index` streams a corpus (:func:`reward_plugins.search.corpus.read_corpus`) into a
tantivy index (github.com/quickwit-oss/tantivy, through the ``tantivy`` Python package) under a
writer heap budget, in a temporary directory renamed into place when complete, with a manifest
(:data:`MANIFEST_NAME`: format version, corpus fingerprint, analyzer, document count). A
directory without the manifest is not an index, so an interrupted build leaves nothing that
looks complete. :class:`SearchIndex` opens one in about a second, whatever its size: the files
are memory-mapped, and the operating system pages in what queries touch.

Analyzer (documents and queries alike): tantivy's ``simple`` tokenizer (runs of alphanumeric
characters, Unicode-aware), tokens of 40 bytes or more dropped, lower-cased, English stopwords
removed (tantivy's list: Lucene's 33 words, "a", "an", "and", ..., "with"), Snowball English
(Porter2) stemming: the shape of Lucene's ``EnglishAnalyzer`` that pyserini indexes with.

Scoring: tantivy's BM25 (``src/query/bm25.rs``), summed over the query's terms:
``idf * (k1 + 1) * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with
``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, ``dl`` the document's token count as tantivy
stores it (one byte per document: exact up to 40 tokens, then rounded down to a coarser step,
like Lucene's norms) and ``avgdl`` the exact mean. tantivy fixes ``k1 = 1.2`` and ``b = 0.75``;
pyserini's Lucene defaults (``k1 = 0.9``, ``b = 0.4``) cannot be set. A query is its analyzed
terms as a boolean query of SHOULD term clauses (a term said twice counts twice, as pyserini's
bag-of-words query does), never parsed as query syntax. A query gets only the documents that
share a term with it, so possibly fewer than ``k`` (none for stopwords only).

Cost: tantivy's Python binding collects its top ``k`` through a ``MultiCollector``, so every
document that holds a query term is scored: tantivy's block-max WAND, which skips documents that
cannot enter the top ``k``, runs only under a bare ``TopDocs`` collector
(github.com/quickwit-oss/tantivy/pull/856). A query therefore costs about the summed length of
its terms' posting lists, which grows with the corpus: about 45 ms for a question at wiki-18's
21M passages, most of it in the few terms found in a fifth or more of the passages ("he",
"from", "which"). The top ``k`` are exact BM25 by default. With ``common_df`` set (``retriever
serve --common-df``), a term found in more than that share of the passages is *common*: the
query first ranks by its other terms, then scores the best :func:`rescore_depth` of those
passages with every term, and returns the top ``k`` of them (each score the sum of its rare and
its common terms' scores, so within a rounding of the exact one; but a passage whose only shared
terms are common, or that the rare terms rank below the depth, is missed). A query of common
terms only, or of rare terms only, is searched exactly.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import shutil
import struct
import sys
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.search.corpus import (
    BAD_LINE_POLICIES,
    CorpusStats,
    read_corpus,
)

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
"""Bumped whenever the schema, analyzer or scoring changes: older indexes are refused."""

MANIFEST_NAME = "reward-plugins-index.json"
TOKENIZER_NAME = "reward_plugins_en_v1"
ANALYZER = {
    "tokenizer": "simple (runs of alphanumeric characters)",
    "remove_long": 40,
    "lowercase": True,
    "stopwords": "english (Lucene's 33 words)",
    "stemmer": "english (Snowball Porter2)",
}
BM25 = {"k1": 1.2, "b": 0.75}
"""tantivy's fixed BM25 parameters."""

DEFAULT_HEAP_MB = 512
"""The writer's memory budget: when its in-memory segments reach it, they are written out."""

MIN_HEAP_MB_PER_THREAD = 15
"""tantivy refuses less than 15 MB of heap per indexing thread."""

MAX_HEAP_MB_PER_THREAD = 4000
"""tantivy refuses 4 GB or more of heap per indexing thread."""

SEARCH_EXTRA = "pip install 'reward-plugins[search]'"
_PROGRESS_EVERY = 4096
_CRC_CHUNK = 1 << 20

RESCORE_DEPTH = 30
"""With ``common_df``: at least this many passages ranked by the rare terms are re-scored."""

Hit = tuple[bytes, float]
"""One search result: the document's JSON text (UTF-8) and its BM25 score."""


class InvalidIndex(RewardPluginsError, ValueError):
    """A directory that is not a usable index (no manifest, another format, damaged), or an
    index that cannot be written where asked."""


def _tantivy() -> Any:
    try:
        return importlib.import_module("tantivy")
    except ImportError:
        raise ImportError(f"the BM25 retriever needs the tantivy package: {SEARCH_EXTRA}") from None


def analyzer() -> Any:
    """The tantivy ``TextAnalyzer`` of documents and queries (see the module docstring).

    Example:
        >>> analyzer().analyze("What is the capital of France? AND ( title:x")
        ['what', 'capit', 'franc', 'titl', 'x']
    """
    tantivy = _tantivy()
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(ANALYZER["remove_long"]))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> Any:
    builder = _tantivy().SchemaBuilder()
    builder.add_text_field(
        "contents", stored=False, tokenizer_name=TOKENIZER_NAME, index_option="freq"
    )
    builder.add_bytes_field("document", stored=True, indexed=False, fast=False)
    return builder.build()


def file_fingerprint(path: Path) -> dict[str, Any]:
    """The corpus identity a cached index is keyed by: resolved path, size, mtime, CRC-32."""
    status = path.stat()
    crc = 0
    with path.open("rb") as stream:
        while chunk := stream.read(_CRC_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return {
        "path": str(path.resolve()),
        "size": status.st_size,
        "mtime_ns": status.st_mtime_ns,
        "crc32": crc,
    }


def build_index(
    corpus: str | Path,
    output: str | Path,
    *,
    bad_lines: str = "refuse",
    heap_mb: int = DEFAULT_HEAP_MB,
    threads: int | None = None,
    progress: bool = False,
    replace: bool = False,
) -> dict[str, Any]:
    """Index ``corpus`` into the directory ``output``; returns the manifest written there.

    Args:
        corpus: a JSON Lines corpus, plain or ``.gz`` (see :mod:`reward_plugins.search.corpus`).
        output: the index directory; it must not exist unless ``replace``.
        bad_lines: ``"refuse"`` (the first bad line stops the build) or ``"skip"``.
        heap_mb: the writer's memory budget in MB, shared by the indexing threads.
        threads: indexing threads (default: the usable CPUs, at most 8).
        progress: a progress bar on stderr (tqdm, over the bytes of the file), erased when the
            build ends.
        replace: replace an existing index at ``output`` once the new one is complete.

    Raises:
        CorpusError: a bad corpus line (``refuse``) or no document.
        InvalidIndex: ``output`` exists (and not ``replace``) or cannot be written.
        InvalidInput: a bad ``bad_lines``, ``heap_mb`` or ``threads``.
        OSError: the corpus cannot be read.
    """
    corpus, output = Path(corpus), Path(output)
    threads = _check_build_options(bad_lines, heap_mb, threads)
    if output.exists() and not replace:
        raise InvalidIndex(f"{output} already exists (remove it, or replace it with --force)")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidIndex(f"{output.parent}: cannot create it: {error.strerror}") from None
    status = corpus.stat()
    building = output.parent / f".{output.name}.building-{uuid.uuid4().hex[:12]}"
    try:
        building.mkdir()
        manifest = _write_index(corpus, building, bad_lines, heap_mb, threads, progress)
        manifest["corpus"] = {
            "path": str(corpus.resolve()),
            "size": status.st_size,
            "mtime_ns": status.st_mtime_ns,
            "crc32": manifest.pop("crc32"),
        }
        _write_manifest(building, manifest)
        _move_into_place(building, output, replace)
    except OSError as error:
        if error.filename is not None and Path(error.filename) == corpus:
            raise
        raise InvalidIndex(f"{output}: cannot write the index: {error.strerror or error}") from None
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return manifest


def _check_build_options(bad_lines: str, heap_mb: int, threads: int | None) -> int:
    if bad_lines not in BAD_LINE_POLICIES:
        raise InvalidInput(f"bad_lines: expected one of {BAD_LINE_POLICIES}, got {bad_lines!r}")
    if threads is None:
        threads = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInput(f"threads: expected an int of at least 1, got {threads!r}")
    if isinstance(heap_mb, bool) or not isinstance(heap_mb, int):
        raise InvalidInput(f"heap_mb: expected an int, got {type(heap_mb).__name__}")
    low, high = MIN_HEAP_MB_PER_THREAD * threads, MAX_HEAP_MB_PER_THREAD * threads
    if not low <= heap_mb <= high:
        raise InvalidInput(
            f"heap_mb: {threads} indexing thread(s) need between {low} and {high} MB, got {heap_mb}"
        )
    return threads


def _write_index(
    corpus: Path, directory: Path, bad_lines: str, heap_mb: int, threads: int, progress: bool
) -> dict[str, Any]:
    tantivy = _tantivy()
    from tqdm import tqdm

    began = time.perf_counter()
    index = tantivy.Index(_schema(), path=str(directory))
    index.register_tokenizer(TOKENIZER_NAME, analyzer())
    writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
    stats = CorpusStats()
    total = corpus.stat().st_size
    with tqdm(
        total=total, unit="B", unit_scale=True, desc="indexing", leave=False,
        disable=not progress, file=sys.stderr, dynamic_ncols=True,
    ) as bar:  # fmt: skip
        try:
            for passage in read_corpus(corpus, bad_lines, stats):
                document = tantivy.Document(contents=passage.contents, document=passage.raw)
                writer.add_document(document)
                if stats.documents % _PROGRESS_EVERY == 0:
                    bar.update(stats.bytes_read - bar.n)
        except BaseException:
            writer.rollback()  # stop the indexing threads before the directory is removed
            raise
        writer.commit()
        writer.wait_merging_threads()
        bar.update(stats.bytes_read - bar.n)
    index.reload()
    documents = index.searcher().num_docs
    if documents != stats.documents:  # pragma: no cover - tantivy lost documents
        raise InvalidIndex(f"{directory}: {stats.documents} documents read, {documents} indexed")
    return {
        "format": "reward-plugins BM25 index",
        "format_version": FORMAT_VERSION,
        "engine": f"tantivy {importlib.metadata.version('tantivy')}",
        "analyzer": ANALYZER,
        "bm25": BM25,
        "documents": documents,
        "lines": stats.lines,
        "bad_lines": bad_lines,
        "skipped": stats.skipped,
        "skipped_lines": stats.skipped_lines,
        "build_seconds": round(time.perf_counter() - began, 3),
        "crc32": stats.crc32,
    }


def _write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    path = directory / MANIFEST_NAME
    with path.open("w", encoding="utf-8") as stream:
        json.dump(manifest, stream, indent=2, ensure_ascii=False)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())


@contextlib.contextmanager
def _building_in(location: Path) -> Iterator[None]:
    """Hold the build turn of the cache directory ``location`` (created if need be): an
    exclusive ``flock`` on the directory itself, so that no lock file is left behind."""
    try:
        location.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(location, os.O_RDONLY)
    except OSError as error:
        raise InvalidIndex(
            f"{location}: cannot use it as the index cache: {error.strerror}"
        ) from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _move_into_place(building: Path, output: Path, replace: bool) -> None:
    """Rename the complete index onto ``output``; an old one is moved aside, then removed, when
    ``replace``, else refused (another build may have finished first)."""
    old = None
    if output.exists() and not replace:
        raise InvalidIndex(f"{output} already exists (remove it, or replace it with --force)")
    if output.exists():
        old = output.parent / f".{output.name}.old-{uuid.uuid4().hex[:12]}"
        output.rename(old)
    building.rename(output)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    descriptor = os.open(output.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the index directory ``path``, or :class:`InvalidIndex` saying why not."""
    path = Path(path)
    if not path.is_dir():
        raise InvalidIndex(f"{path}: not an index directory (it does not exist or is a file)")
    try:
        manifest = json.loads((path / MANIFEST_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidIndex(
            f"{path}: no {MANIFEST_NAME}: not a complete index of `reward-plugins retriever index`"
        ) from None
    except (OSError, ValueError) as error:
        raise InvalidIndex(f"{path / MANIFEST_NAME}: unreadable ({error})") from None
    version = manifest.get("format_version") if isinstance(manifest, dict) else None
    if version != FORMAT_VERSION:
        raise InvalidIndex(
            f"{path}: index format {version!r}, this version reads {FORMAT_VERSION}; rebuild it "
            "with `reward-plugins retriever index`"
        )
    return manifest


class SearchIndex:
    """A BM25 index opened read-only (memory-mapped); searches are safe from several threads
    and release the GIL while tantivy scores.

    Example:
        >>> from reward_plugins.search.corpus import sample_corpus_path
        >>> index = SearchIndex.for_corpus(sample_corpus_path())
        >>> [(document["contents"].split("\\n")[0], round(score, 2))
        ...  for document, score in index.search(["Who wrote Hamlet?"], 2)[0]]
        [('Hamlet', 8.55), ('William Shakespeare', 7.06)]
    """

    def __init__(self, path: str | Path, *, common_df: float | None = None) -> None:
        tantivy = _tantivy()
        self.path = Path(path)
        self.common_df = check_common_df(common_df)
        self.manifest = read_manifest(self.path)
        try:
            index = tantivy.Index.open(str(self.path))
        except ValueError as error:
            raise InvalidIndex(f"{self.path}: tantivy cannot open it ({error})") from None
        index.register_tokenizer(TOKENIZER_NAME, analyzer())
        self._searcher = index.searcher()
        self._schema = index.schema
        self._analyzer = analyzer()
        self._term_query = tantivy.Query.term_query
        self._boolean_query = tantivy.Query.boolean_query
        self._boost_query = tantivy.Query.boost_query
        self._should = tantivy.Occur.Should
        if self._searcher.num_docs != self.manifest.get("documents"):
            raise InvalidIndex(
                f"{self.path}: {self._searcher.num_docs} documents, the manifest says "
                f"{self.manifest.get('documents')!r}: the index is damaged; rebuild it"
            )

    @classmethod
    def for_corpus(
        cls,
        corpus: str | Path,
        *,
        bad_lines: str = "refuse",
        cache_dir: str | Path | None = None,
        progress: bool = False,
        common_df: float | None = None,
    ) -> SearchIndex:
        """The index of ``corpus`` from the cache, built there first if need be.

        The cache entry is ``cache_dir/<key>`` (default :func:`default_cache_dir`), the key a
        hash of the corpus's resolved path, size, mtime and CRC-32, the format version and
        ``bad_lines``: a restart with the same file opens the index, a changed file rebuilds.
        Builds into one cache directory take turns (an exclusive ``flock`` on the directory),
        so processes or threads that open the same new entry at once build it once: the others
        wait, then open it.
        """
        corpus = Path(corpus)
        fingerprint = file_fingerprint(corpus)
        identity = json.dumps([fingerprint, FORMAT_VERSION, TOKENIZER_NAME, bad_lines])
        key = hashlib.sha256(identity.encode()).hexdigest()[:24]
        location = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        entry = location / key
        if not (entry / MANIFEST_NAME).is_file():
            with _building_in(location):
                if not (entry / MANIFEST_NAME).is_file():  # not built while this one waited
                    logger.info("indexing %s into %s", corpus, entry)
                    build_index(corpus, entry, bad_lines=bad_lines, progress=progress)
        return cls(entry, common_df=common_df)

    def __len__(self) -> int:
        return int(self._searcher.num_docs)

    def terms(self, query: str) -> tuple[tuple[str, int], ...]:
        """The analyzed terms of ``query`` with their counts, sorted: the query's identity
        (two queries with the same terms get the same documents and scores).

        Example:
            >>> from reward_plugins.search.corpus import sample_corpus_path
            >>> index = SearchIndex.for_corpus(sample_corpus_path())
            >>> index.terms("The capitals of France, capital city")
            (('capit', 2), ('citi', 1), ('franc', 1))
        """
        try:
            tokens = self._analyzer.analyze(query)
        except UnicodeEncodeError as error:
            raise InvalidInput(
                f"query {query[:40]!r}: a lone surrogate at character {error.start} is not text"
            ) from None
        return tuple(sorted(Counter(tokens).items()))

    def search_terms(self, terms: Sequence[tuple[str, int]], topk: int) -> list[Hit]:
        """Up to ``topk`` ``(document JSON, score)``, best first, for analyzed ``terms``."""
        if not terms:
            return []
        searcher = self._searcher
        rare = self._rare(terms)
        if rare is None:
            found = searcher.search(self._query(terms), topk, count=False).hits
        else:
            found = self._rescored(rare, terms, topk)
        return [
            (searcher.doc(address).get_first("document"), float(score)) for score, address in found
        ]

    def _query(self, terms: Sequence[tuple[str, int]]) -> Any:
        clauses = []
        for term, count in terms:
            clause = self._term_query(self._schema, "contents", term, index_option="freq")
            if count > 1:
                clause = self._boost_query(clause, float(count))
            clauses.append((self._should, clause))
        return self._boolean_query(clauses)

    def _rare(self, terms: Sequence[tuple[str, int]]) -> list[tuple[str, int]] | None:
        """The terms that are not common (``common_df``), or None to search them all."""
        if self.common_df is None:
            return None
        most = self.common_df * len(self)
        rare = [(t, c) for t, c in terms if self._searcher.doc_freq("contents", t) <= most]
        return rare if rare and len(rare) < len(terms) else None

    def _rescored(
        self, rare: list[tuple[str, int]], terms: Sequence[tuple[str, int]], topk: int
    ) -> list[tuple[float, Any]]:
        """The best ``rescore_depth(topk)`` passages by the ``rare`` terms, their scores
        completed with the common terms' (tantivy's explanation of those), the top ``topk``."""
        searcher = self._searcher
        candidates = searcher.search(self._query(rare), rescore_depth(topk), count=False).hits
        common = self._query([term for term in terms if term not in rare])
        scored = [
            (_f32(score + self._explained(common, address)), address)
            for score, address in candidates
        ]
        scored.sort(key=lambda pair: (-pair[0], pair[1].segment_ord, pair[1].doc))
        return scored[:topk]

    def _explained(self, query: Any, address: Any) -> float:
        """The score of the passage at ``address`` for ``query``; 0 when it has none of the
        query's terms (tantivy then refuses to explain it)."""
        try:
            return float(orjson.loads(query.explain(self._searcher, address).to_json())["value"])
        except ValueError:
            return 0.0

    def search(self, queries: Sequence[str], topk: int) -> list[list[tuple[dict[str, Any], float]]]:
        """Per query, up to ``topk`` ``(document, score)`` pairs, best first, scores > 0.

        Raises :class:`InvalidInput` when ``queries`` is not a sequence of str or ``topk`` is
        not an int of at least 1.
        """
        if isinstance(queries, str) or not all(isinstance(q, str) for q in queries):
            raise InvalidInput("queries: expected a list of str")
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise InvalidInput(f"topk: expected an int of at least 1, got {topk!r}")
        topk = min(topk, len(self))
        terms = [self.terms(query) for query in queries]
        return [
            [(json.loads(raw), score) for raw, score in self.search_terms(query, topk)]
            for query in terms
        ]


def _f32(value: float) -> float:
    """``value`` as the 32-bit float tantivy scores in (its explanation prints it shortest)."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def rescore_depth(topk: int) -> int:
    """How many passages ranked by a query's rare terms are re-scored (``common_df``)."""
    return max(RESCORE_DEPTH, 10 * topk)


def check_common_df(common_df: float | None) -> float | None:
    """``common_df`` if it is None or a share of the passages in (0, 1], else
    :class:`InvalidInput`."""
    if common_df is None:
        return None
    if (
        isinstance(common_df, bool)
        or not isinstance(common_df, int | float)
        or not 0 < common_df <= 1
    ):
        raise InvalidInput(
            f"common_df: expected a share of the passages above 0 and at most 1, got {common_df!r}"
        )
    return float(common_df)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/reward-plugins/indexes`` (``~/.cache`` when the variable is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reward-plugins" / "indexes"
