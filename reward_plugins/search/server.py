"""An HTTP server of a BM25 index in Search-R1's retrieval protocol, that no client can stall.

Search-R1 (github.com/PeterGriffinJin/Search-R1, ``search_r1/search/retrieval_server.py``) trains
agents against a retrieval server that answers ``POST /retrieve``::

    request:  {"queries": [str, ...], "topk": int, "return_scores": bool}
    response: {"result": [per query: [{"document": {"id": ..., "contents": ...}, "score": float},
                                      ...]]}

and, with ``"return_scores": false`` (the default), each query's list holds the document objects
alone; ``topk`` absent or null is the server's default. ``GET /health`` answers the document
count, the index path, the limits and the counters (cache, requests, connections).

How it stays responsive (every limit is a field of :class:`Limits`, a CLI option of
``reward-plugins retriever serve``):

- the connections are :class:`reward_plugins.runtime.http.HttpServer`'s (one event loop, every
  connection limit below); searches run on a pool of ``search_threads`` threads (tantivy
  releases the GIL while it scores), never one thread per connection;
- a request's queries are searched :data:`SEARCH_CHUNK` at a time, at most ``search_threads``
  chunks of one request at once, so the chunks of a small request interleave with a big one's;
- a result cache of ``cache_mb`` (least recently used out first) is keyed by the analyzed
  query and ``topk``, and identical searches in flight are done once (the samples of a GRPO group
  send the same query);
- caps: request body bytes (413), queries per request (413), ``topk`` (400), distinct terms per
  query (400), response bytes (413), each answered with a JSON ``{"error": ...}`` naming the cap;
- a deadline per request: searches not done by ``request_timeout`` are dropped and the request
  is answered 503 with ``Retry-After``;
- ``read_timeout`` for a request's headers and body (and for the client to take the answer),
  ``idle_timeout`` between the requests of a keep-alive connection: slow-dripping connections
  are closed;
- at most ``max_connections`` open connections and ``max_requests`` requests being answered;
  beyond, 503 with ``Retry-After``;
- one log line per failure (``logging``, logger ``reward_plugins.search.server``), no traceback
  for a client that went away.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import orjson

from reward_plugins.errors import InvalidInput
from reward_plugins.runtime.http import (
    HttpServer,
    Refusal,
    Request,
    check_limits,
    limit,
    overloaded,
    running_in_thread,
    serve_until_signal,
)
from reward_plugins.search.index import Hit, SearchIndex

logger = logging.getLogger(__name__)

RETRIEVE_PATH = "/retrieve"
HEALTH_PATH = "/health"
DEFAULT_TOPK = 3
"""Documents per query when a request gives no ``topk`` (Search-R1's training default)."""

SEARCH_CHUNK = 8
"""Queries searched together: the unit that a big request's work is split into."""

Terms = tuple[tuple[str, int], ...]
"""A query as analyzed: its distinct terms and their counts (:meth:`SearchIndex.terms`)."""
Key = tuple[Terms, int]
"""A search: the analyzed query and ``topk``."""

_HIT_OVERHEAD = 96
"""Bytes a cached hit costs beyond its document's JSON (the tuple, the float, the list slot)."""


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one server accepts and holds; every field is a ``retriever serve`` option
    (``max_body_mb`` is ``--max-body-mb``), its help in the field's ``metadata``."""

    max_body_mb: float = limit(16.0, "largest request body in MiB; 413 beyond")
    max_queries: int = limit(4096, "most queries in one request; 413 beyond")
    max_topk: int = limit(100, "largest topk; 400 beyond")
    max_query_terms: int = limit(256, "most distinct analyzed terms in one query; 400 beyond")
    max_response_mb: float = limit(64.0, "largest response body in MiB; 413 beyond")
    request_timeout: float = limit(
        20.0, "seconds a request's searches may take; 503 beyond, the rest dropped"
    )
    read_timeout: float = limit(
        10.0, "seconds a request's headers and body may take to arrive, and its answer to leave"
    )
    idle_timeout: float = limit(60.0, "seconds a keep-alive connection may wait idle")
    max_connections: int = limit(1024, "most open connections; 503 beyond")
    max_requests: int = limit(256, "most requests being answered at once; 503 beyond")
    cache_mb: float = limit(256.0, "the result cache in MiB, 0 for none")
    search_threads: int = dataclasses.field(
        default_factory=_usable_cpus,
        metadata={"help": "threads that search"},
    )

    def __post_init__(self) -> None:
        check_limits(self, zero_allowed=("cache_mb",))


class _ResultCache:
    """Per ``(terms, topk)``, the hits; least recently used out first when over ``limit`` bytes.

    ``misses`` counts the searches not found here; ``shared``, those of them that waited for an
    identical search already in flight instead of searching again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.hits = 0
        self.misses = 0
        self.shared = 0
        self._entries: OrderedDict[Any, tuple[list[Hit], int]] = OrderedDict()

    def get(self, key: Any) -> list[Hit] | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Any, hits: list[Hit]) -> None:
        cost = sum(len(raw) + _HIT_OVERHEAD for raw, _ in hits) + 64 * (1 + len(key[0]))
        if cost > self.limit or key in self._entries:
            return
        self._entries[key] = (hits, cost)
        self.size += cost
        while self.size > self.limit:
            _, (_, freed) = self._entries.popitem(last=False)
            self.size -= freed

    def stats(self) -> dict[str, int]:
        return {
            "entries": len(self._entries),
            "bytes": self.size,
            "limit_bytes": self.limit,
            "hits": self.hits,
            "misses": self.misses,
            "shared": self.shared,
        }


class RetrievalServer:
    """Answers ``POST /retrieve`` and ``GET /health`` from one :class:`SearchIndex`.

    Use :meth:`start` (in a running event loop) then :meth:`close`, or :func:`running_server`
    (a background thread) or :func:`serve` (blocks).
    """

    def __init__(
        self, index: SearchIndex, *, topk: int = DEFAULT_TOPK, limits: Limits | None = None
    ) -> None:
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise InvalidInput(f"topk: expected an int of at least 1, got {topk!r}")
        self.index = index
        self.topk = topk
        self.limits = limits or Limits()
        if topk > self.limits.max_topk:
            raise InvalidInput(f"topk: {topk} is above max_topk ({self.limits.max_topk})")
        self._cache = _ResultCache(int(self.limits.cache_mb * 2**20))
        self._in_flight: dict[Key, asyncio.Future[list[Hit]]] = {}
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._http = HttpServer(self._route, self.limits, logger)

    # --- life cycle ------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind ``host:port`` (0: a free port, see :attr:`url`) and start accepting."""
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.limits.search_threads, thread_name_prefix="bm25-search"
        )
        await self._http.start(host, port)

    async def close(self) -> None:
        """Stop accepting, close the connections, drop the searches not started."""
        await self._http.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def host(self) -> str:
        return self._http.host

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        """The ``/retrieve`` URL."""
        return self._http.base_url + RETRIEVE_PATH

    @property
    def health_url(self) -> str:
        """The ``/health`` URL."""
        return self.url.removesuffix(RETRIEVE_PATH) + HEALTH_PATH

    def health(self) -> dict[str, Any]:
        """The ``GET /health`` body."""
        return {
            "status": "ok",
            "documents": len(self.index),
            "index": str(self.index.path),
            "topk": self.topk,
            "common_df": self.index.common_df,
            "cache": self._cache.stats(),
            "connections": self._http.connections,
            "requests_in_progress": self._http.requests,
            "requests": dict(self._http.counters),
            "limits": dataclasses.asdict(self.limits),
        }

    # --- requests --------------------------------------------------------------------------

    async def _route(self, request: Request) -> bytes:
        target, method = request.path, request.method
        if target == RETRIEVE_PATH and method == "POST":
            try:
                return await asyncio.wait_for(
                    self._retrieve(request.body), self.limits.request_timeout
                )
            except asyncio.TimeoutError:
                raise overloaded(
                    f"the searches did not finish within {self.limits.request_timeout:g} s "
                    "(--request-timeout); the rest were dropped"
                ) from None
        if target == HEALTH_PATH and method == "GET":
            return orjson.dumps(self.health())
        if target in (RETRIEVE_PATH, HEALTH_PATH):
            allowed = "POST" if target == RETRIEVE_PATH else "GET"
            raise Refusal(HTTPStatus.METHOD_NOT_ALLOWED, f"use {allowed}", [("Allow", allowed)])
        raise Refusal(HTTPStatus.NOT_FOUND, f"no such path: {target}")

    async def _retrieve(self, body: bytes) -> bytes:
        queries, topk, return_scores = self._parse(body)
        loop = asyncio.get_running_loop()
        terms = await loop.run_in_executor(self._executor, self._analyze, queries)
        results = await self._search_all(terms, min(topk, len(self.index)))
        limit = int(self.limits.max_response_mb * 2**20)
        parts: list[bytes] = []
        size = 16
        for hits in results:
            part = _hits_json(hits, return_scores)
            size += len(part) + 1
            if size > limit:
                raise Refusal(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                    f"the answer would be over {limit} bytes (--max-response-mb); ask for fewer "
                    "queries or a smaller topk",
                )
            parts.append(part)
        return b'{"result":[' + b",".join(parts) + b"]}"

    def _parse(self, body: bytes) -> tuple[list[str], int, bool]:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            raise Refusal(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {error}") from None
        if not isinstance(payload, dict):
            kind = type(payload).__name__
            raise Refusal(HTTPStatus.BAD_REQUEST, f"the body must be a JSON object, got {kind}")
        queries = payload.get("queries")
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            kind = "missing" if "queries" not in payload else f"a {type(queries).__name__}"
            raise Refusal(
                HTTPStatus.BAD_REQUEST, f"'queries' must be a list of strings, got {kind}"
            )
        if len(queries) > self.limits.max_queries:
            raise Refusal(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"{len(queries)} queries, over {self.limits.max_queries} per request "
                "(--max-queries)",
            )
        topk = payload.get("topk")
        if topk is None:
            topk = self.topk
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise Refusal(
                HTTPStatus.BAD_REQUEST, f"'topk' must be an integer of at least 1, got {topk!r}"
            )
        if topk > self.limits.max_topk:
            raise Refusal(
                HTTPStatus.BAD_REQUEST,
                f"'topk' is {topk}, over {self.limits.max_topk} (--max-topk)",
            )
        return_scores = payload.get("return_scores", False)
        if not isinstance(return_scores, bool):
            raise Refusal(
                HTTPStatus.BAD_REQUEST,
                f"'return_scores' must be true or false, got {return_scores!r}",
            )
        return queries, topk, return_scores

    def _analyze(self, queries: list[str]) -> list[Terms]:
        """The analyzed terms of every query (in a search thread: long texts take time)."""
        analyzed = []
        for position, query in enumerate(queries):
            try:
                terms = self.index.terms(query)
            except InvalidInput as error:
                raise Refusal(HTTPStatus.BAD_REQUEST, f"query {position}: {error}") from None
            if len(terms) > self.limits.max_query_terms:
                raise Refusal(
                    HTTPStatus.BAD_REQUEST,
                    f"query {position} has {len(terms)} distinct terms, over "
                    f"{self.limits.max_query_terms} (--max-query-terms)",
                )
            analyzed.append(terms)
        return analyzed

    async def _search_all(self, queries: list[Terms], topk: int) -> list[list[Hit]]:
        """The hits of every query: from the cache, from an identical search in flight, or
        searched here (in chunks, at most ``search_threads`` chunks of this request at once)."""
        loop = asyncio.get_running_loop()
        found: dict[Key, list[Hit]] = {}
        shared: dict[Key, asyncio.Future[list[Hit]]] = {}
        mine: dict[Key, asyncio.Future[list[Hit]]] = {}
        for terms in queries:
            key = (terms, topk)
            if key in found or key in shared or key in mine:
                continue
            cached = self._cache.get(key) if terms else []
            if cached is not None:
                found[key] = cached
            elif key in self._in_flight:
                shared[key] = self._in_flight[key]
                self._cache.shared += 1
            else:
                mine[key] = self._in_flight[key] = loop.create_future()
        try:
            found.update(await self._search_keys(list(mine), mine))
            if shared:
                await asyncio.wait(shared.values())
                again = [key for key, future in shared.items() if future.cancelled()]
                found.update({k: f.result() for k, f in shared.items() if not f.cancelled()})
                found.update(await self._search_keys(again, {}))  # their owner gave up
        finally:
            for key, future in mine.items():
                if self._in_flight.get(key) is future:
                    del self._in_flight[key]
                if not future.done():
                    future.cancel()
        return [found[(terms, topk)] for terms in queries]

    async def _search_keys(
        self, keys: list[Key], futures: dict[Key, asyncio.Future[list[Hit]]]
    ) -> dict[Key, list[Hit]]:
        loop = asyncio.get_running_loop()
        semaphore = asyncio.Semaphore(self.limits.search_threads)
        found: dict[Key, list[Hit]] = {}

        async def run(chunk: list[Key]) -> None:
            async with semaphore:
                results = await loop.run_in_executor(self._executor, self._search_chunk, chunk)
            for key, hits in zip(chunk, results, strict=True):
                found[key] = hits
                self._cache.put(key, hits)
                future = futures.get(key)
                if future is not None and not future.done():
                    future.set_result(hits)

        chunks = [keys[i : i + SEARCH_CHUNK] for i in range(0, len(keys), SEARCH_CHUNK)]
        await asyncio.gather(*(run(chunk) for chunk in chunks))
        return found

    def _search_chunk(self, keys: list[Key]) -> list[list[Hit]]:
        return [self.index.search_terms(terms, topk) for terms, topk in keys]


def _hits_json(hits: list[Hit], return_scores: bool) -> bytes:
    if return_scores:
        return (
            b"["
            + b",".join(
                b'{"document":' + raw + b',"score":' + orjson.dumps(score) + b"}"
                for raw, score in hits
            )
            + b"]"
        )
    return b"[" + b",".join(raw for raw, _ in hits) + b"]"


# --- running it ----------------------------------------------------------------------------


@contextlib.contextmanager
def running_server(
    index: SearchIndex | str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    topk: int = DEFAULT_TOPK,
    **limits: Any,
) -> Iterator[RetrievalServer]:
    """A :class:`RetrievalServer` of ``index`` (a :class:`SearchIndex` or an index directory),
    serving in a background thread (its own event loop) for the block, then closed; ``limits``
    are fields of :class:`Limits`. Its ``url`` is the ``/retrieve`` address.

    Example:
        >>> import json, urllib.request
        >>> from reward_plugins.search.corpus import sample_corpus_path
        >>> index = SearchIndex.for_corpus(sample_corpus_path())
        >>> with running_server(index, max_topk=5) as running:
        ...     request = urllib.request.Request(
        ...         running.url, data=json.dumps({"queries": ["Who wrote Hamlet?"]}).encode()
        ...     )
        ...     answer = json.load(urllib.request.urlopen(request, timeout=10))
        >>> [document["contents"].split("\\n")[0] for document in answer["result"][0]]
        ['Hamlet', 'William Shakespeare', 'Ernest Hemingway']
    """
    if not isinstance(index, SearchIndex):
        index = SearchIndex(index)
    unknown = set(limits) - {spec.name for spec in dataclasses.fields(Limits)}
    if unknown:
        raise InvalidInput(f"unknown limit(s) {', '.join(sorted(unknown))}")
    server = RetrievalServer(index, topk=topk, limits=Limits(**limits))
    with running_in_thread(server, host, port):
        yield server


def serve(
    index: SearchIndex,
    host: str = "127.0.0.1",
    port: int = 8000,
    topk: int = DEFAULT_TOPK,
    limits: Limits | None = None,
    ready: Callable[[RetrievalServer], None] | None = None,
) -> None:
    """Answer on ``host:port`` until SIGTERM or SIGINT (blocks); ``ready(server)`` once bound
    (:func:`reward_plugins.runtime.http.serve_until_signal`)."""
    serve_until_signal(RetrievalServer(index, topk=topk, limits=limits), host, port, ready)
