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

- one event loop (asyncio, HTTP/1.1 parsed by h11: github.com/python-hyper/h11) holds every
  connection; searches run on a pool of ``search_threads`` threads (tantivy releases the GIL
  while it scores), never one thread per connection;
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
import signal
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.options import is_finite_number
from reward_plugins.search.index import Hit, SearchIndex

logger = logging.getLogger(__name__)

RETRIEVE_PATH = "/retrieve"
HEALTH_PATH = "/health"
DEFAULT_TOPK = 3
"""Documents per query when a request gives no ``topk`` (Search-R1's training default)."""

SEARCH_CHUNK = 8
"""Queries searched together: the unit that a big request's work is split into."""

LINGER_BYTES = 1 << 30
"""The most bytes of a refused request read (and dropped) before its connection is closed."""

LINGER_QUIET = 0.5
"""Seconds without a byte from a refused client after which its connection is closed."""

MAX_HEADER_BYTES = 16384
"""A request line and headers still incomplete past this many bytes are refused (431)."""

Terms = tuple[tuple[str, int], ...]
"""A query as analyzed: its distinct terms and their counts (:meth:`SearchIndex.terms`)."""
Key = tuple[Terms, int]
"""A search: the analyzed query and ``topk``."""

_HIT_OVERHEAD = 96
"""Bytes a cached hit costs beyond its document's JSON (the tuple, the float, the list slot)."""


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _limit(default: Any, help: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one server accepts and holds; every field is a ``retriever serve`` option
    (``max_body_mb`` is ``--max-body-mb``), its help in the field's ``metadata``."""

    max_body_mb: float = _limit(16.0, "largest request body in MiB; 413 beyond")
    max_queries: int = _limit(4096, "most queries in one request; 413 beyond")
    max_topk: int = _limit(100, "largest topk; 400 beyond")
    max_query_terms: int = _limit(256, "most distinct analyzed terms in one query; 400 beyond")
    max_response_mb: float = _limit(64.0, "largest response body in MiB; 413 beyond")
    request_timeout: float = _limit(
        20.0, "seconds a request's searches may take; 503 beyond, the rest dropped"
    )
    read_timeout: float = _limit(
        10.0, "seconds a request's headers and body may take to arrive, and its answer to leave"
    )
    idle_timeout: float = _limit(60.0, "seconds a keep-alive connection may wait idle")
    max_connections: int = _limit(1024, "most open connections; 503 beyond")
    max_requests: int = _limit(256, "most requests being answered at once; 503 beyond")
    cache_mb: float = _limit(256.0, "the result cache in MiB, 0 for none")
    search_threads: int = dataclasses.field(
        default_factory=_usable_cpus,
        metadata={"help": "threads that search"},
    )

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            low = 0 if spec.name == "cache_mb" else 1 if spec.type == "int" else 1e-3
            integer = spec.type == "int"
            numeric = is_finite_number(value)
            if not numeric or (integer and not isinstance(value, int)) or not low <= value < 1e9:
                kind = "an int" if integer else "a number"
                raise InvalidInput(
                    f"{spec.name}: expected {kind} of at least {low:g}, got {value!r} "
                    f"({type(value).__name__})"
                )


class _Refusal(RewardPluginsError):
    """A request answered with an error: ``status``, a one-line message, extra headers."""

    def __init__(self, status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


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
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._requests = 0
        self._counters: dict[str, int] = {"answered": 0, "refused": 0, "overloaded": 0}
        self.host = ""
        self.port = 0

    # --- life cycle ------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind ``host:port`` (0: a free port, see :attr:`url`) and start accepting."""
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(_log_loop_error)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            self.limits.search_threads, thread_name_prefix="bm25-search"
        )
        _raise_descriptor_limit(self.limits.max_connections + 256)
        self._server = await asyncio.start_server(
            self._connection, host, port, backlog=min(4096, self.limits.max_connections)
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop accepting, close the connections, drop the searches not started."""
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=2.0)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def url(self) -> str:
        """The ``/retrieve`` URL."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}{RETRIEVE_PATH}"

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
            "cache": self._cache.stats(),
            "connections": self._connections,
            "requests_in_progress": self._requests,
            "requests": dict(self._counters),
            "limits": dataclasses.asdict(self.limits),
        }

    # --- connections -----------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h11

        peer = _peer(writer)
        if self._connections >= self.limits.max_connections:
            self._counters["overloaded"] += 1
            writer.write(_raw_overload(f"over {self.limits.max_connections} connections"))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), LINGER_QUIET)
                await self._linger(reader, within=LINGER_QUIET)
            await _close(writer)
            return
        self._connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        wait = self.limits.read_timeout  # a new connection sends its request at once
        try:
            while True:
                keep_alive = await self._exchange(connection, reader, writer, wait)
                if not keep_alive or connection.our_state is not h11.DONE:
                    break
                connection.start_next_cycle()
                wait = self.limits.idle_timeout
        except (ConnectionError, asyncio.IncompleteReadError) as error:
            logger.info("%s: the client went away (%s)", peer, type(error).__name__)
        except (TimeoutError, asyncio.TimeoutError):
            logger.info("%s: closed, too slow (read timeout %gs)", peer, self.limits.read_timeout)
            with contextlib.suppress(Exception):
                late = f"the request did not arrive within {self.limits.read_timeout:g} s"
                refusal = _Refusal(HTTPStatus.REQUEST_TIMEOUT, f"{late} (--read-timeout)")
                await self._send(connection, writer, refusal, keep_alive=False)
        except h11.RemoteProtocolError as error:
            logger.info("%s: not HTTP/1.1 (%s)", peer, error)
            with contextlib.suppress(Exception):
                refusal = _Refusal(error.error_status_hint, f"not HTTP/1.1: {error}")
                await self._send(connection, writer, refusal, keep_alive=False)
                await self._linger(reader)
        finally:
            self._connections -= 1
            self._tasks.discard(task)
            await _close(writer)

    async def _exchange(
        self,
        connection: Any,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        first_wait: float,
    ) -> bool:
        """Read one request, answer it; whether the connection may serve another."""
        import h11

        loop = asyncio.get_running_loop()
        began: list[float] = []
        event = await self._next_event(connection, reader, first_wait, began)
        if event is None:  # closed, or idle too long: end quietly
            return False
        deadline = (began[0] if began else loop.time()) + self.limits.read_timeout
        assert isinstance(event, h11.Request)
        try:
            body = await self._read_body(connection, reader, writer, event, deadline)
            if self._requests >= self.limits.max_requests:
                self._counters["overloaded"] += 1
                raise _Refusal(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"over {self.limits.max_requests} requests in progress; retry shortly",
                    [("Retry-After", "1")],
                )
            self._requests += 1
            try:
                answer = await self._route(event, body)
            finally:
                self._requests -= 1
        except _Refusal as refusal:
            self._counters["refused"] += 1
            keep = refusal.status < 500 and connection.their_state is h11.DONE
            await self._send(connection, writer, refusal, keep_alive=keep)
            if connection.their_state is not h11.DONE:
                await self._linger(reader)
            return keep
        self._counters["answered"] += 1
        await self._send(connection, writer, answer)
        return True

    async def _next_event(
        self,
        connection: Any,
        reader: asyncio.StreamReader,
        wait: float,
        began: list[float] | None = None,
    ) -> Any:
        """The next h11 event, reading for at most ``wait`` s; None when the client closed.

        With ``began``, waiting for a request to begin: running out of time is then no error
        (None), and once its first bytes arrive (their time appended to ``began``) the rest of
        it has ``read_timeout`` s.
        """
        import h11

        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = connection.next_event()
            if event is not h11.NEED_DATA:
                return None if isinstance(event, h11.ConnectionClosed) else event
            try:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise asyncio.TimeoutError
                data = await asyncio.wait_for(reader.read(65536), remaining)
            except asyncio.TimeoutError:
                if began is not None and not began:
                    return None
                raise TimeoutError from None
            if began is not None and not began and data:
                began.append(loop.time())
                deadline = began[0] + self.limits.read_timeout
            connection.receive_data(data)

    async def _read_body(
        self,
        connection: Any,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: Any,
        deadline: float,
    ) -> bytes:
        import h11

        limit = int(self.limits.max_body_mb * 2**20)
        declared = _header(request, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _Refusal(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"the body is {int(declared)} bytes, over {limit} (--max-body-mb)",
            )
        if connection.client_is_waiting_for_100_continue:
            await self._write(
                connection, writer, h11.InformationalResponse(status_code=100, headers=[])
            )
        loop = asyncio.get_running_loop()
        parts: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event(connection, reader, max(0.0, deadline - loop.time()))
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    raise _Refusal(
                        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"the body is over {limit} bytes (--max-body-mb)",
                    )
                parts.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(parts)
            elif event is None or isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("closed in the middle of a request")

    async def _linger(self, reader: asyncio.StreamReader, within: float | None = None) -> None:
        """Read and drop what a refused client still sends (until it is quiet for
        :data:`LINGER_QUIET` s, for at most ``within`` s (default ``read_timeout``) and
        :data:`LINGER_BYTES`), so that closing does not reset the connection before the client
        has read the answer (a refused request would otherwise end in a broken pipe). A
        connection over ``max_connections`` lingers :data:`LINGER_QUIET` s at most, so that
        connections beyond the cap cannot pile up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.limits.read_timeout if within is None else within)
        dropped = 0
        with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
            while dropped < LINGER_BYTES and (remaining := deadline - loop.time()) > 0:
                data = await asyncio.wait_for(reader.read(1 << 20), min(remaining, LINGER_QUIET))
                if not data:
                    return
                dropped += len(data)

    async def _write(self, connection: Any, writer: Any, event: Any) -> None:
        data = connection.send(event)
        if data:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout)

    async def _send(
        self,
        connection: Any,
        writer: asyncio.StreamWriter,
        answer: bytes | _Refusal,
        keep_alive: bool = True,
    ) -> None:
        import h11

        headers = [("Content-Type", "application/json; charset=utf-8")]
        if isinstance(answer, _Refusal):
            status = int(answer.status)
            body = orjson.dumps({"error": str(answer)})
            headers += answer.headers
        else:
            status, body = 200, answer
        if not keep_alive:
            headers.append(("Connection", "close"))
        headers.append(("Content-Length", str(len(body))))
        if connection.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # the connection cannot carry a response any more
        await self._write(connection, writer, h11.Response(status_code=status, headers=headers))
        await self._write(connection, writer, h11.Data(data=body))
        await self._write(connection, writer, h11.EndOfMessage())

    # --- requests --------------------------------------------------------------------------

    async def _route(self, request: Any, body: bytes) -> bytes:
        target = urlsplit(request.target.decode("latin-1")).path
        method = request.method.decode("latin-1")
        if target == RETRIEVE_PATH and method == "POST":
            try:
                return await asyncio.wait_for(self._retrieve(body), self.limits.request_timeout)
            except asyncio.TimeoutError:
                raise _Refusal(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"the searches did not finish within {self.limits.request_timeout:g} s "
                    "(--request-timeout); the rest were dropped",
                    [("Retry-After", "1")],
                ) from None
        if target == HEALTH_PATH and method == "GET":
            return orjson.dumps(self.health())
        if target in (RETRIEVE_PATH, HEALTH_PATH):
            allowed = "POST" if target == RETRIEVE_PATH else "GET"
            raise _Refusal(HTTPStatus.METHOD_NOT_ALLOWED, f"use {allowed}", [("Allow", allowed)])
        raise _Refusal(HTTPStatus.NOT_FOUND, f"no such path: {target}")

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
                raise _Refusal(
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
            raise _Refusal(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {error}") from None
        if not isinstance(payload, dict):
            kind = type(payload).__name__
            raise _Refusal(HTTPStatus.BAD_REQUEST, f"the body must be a JSON object, got {kind}")
        queries = payload.get("queries")
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            kind = "missing" if "queries" not in payload else f"a {type(queries).__name__}"
            raise _Refusal(
                HTTPStatus.BAD_REQUEST, f"'queries' must be a list of strings, got {kind}"
            )
        if len(queries) > self.limits.max_queries:
            raise _Refusal(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"{len(queries)} queries, over {self.limits.max_queries} per request "
                "(--max-queries)",
            )
        topk = payload.get("topk")
        if topk is None:
            topk = self.topk
        if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
            raise _Refusal(
                HTTPStatus.BAD_REQUEST, f"'topk' must be an integer of at least 1, got {topk!r}"
            )
        if topk > self.limits.max_topk:
            raise _Refusal(
                HTTPStatus.BAD_REQUEST,
                f"'topk' is {topk}, over {self.limits.max_topk} (--max-topk)",
            )
        return_scores = payload.get("return_scores", False)
        if not isinstance(return_scores, bool):
            raise _Refusal(
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
                raise _Refusal(HTTPStatus.BAD_REQUEST, f"query {position}: {error}") from None
            if len(terms) > self.limits.max_query_terms:
                raise _Refusal(
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


def _header(request: Any, name: bytes) -> str | None:
    for key, value in request.headers:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _raw_overload(reason: str) -> bytes:
    body = orjson.dumps({"error": f"{reason}; retry shortly"})
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
        b"Retry-After: 1\r\nConnection: close\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 1.0)


def _raise_descriptor_limit(wanted: int) -> None:
    """Lift the soft limit on open files towards ``wanted`` (as far as the hard limit allows),
    so that ``max_connections`` connections can be open; the event loop pauses accepting, with
    one log line, when the descriptors run out all the same."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < wanted:
        logger.warning("at most %d open files: fewer connections than max_connections fit", target)


_loop_errors: dict[str, tuple[float, int]] = {}
"""Per event-loop error message: when it was last logged, and how many were not logged since."""


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's errors (e.g. out of file descriptors on accept) in one line each, at
    most one line per second per message: the loop reports each failed accept of a burst."""
    error = context.get("exception")
    message = str(context.get("message", "event loop error"))
    now = loop.time()
    last, quiet = _loop_errors.get(message, (-1.0, 0))
    if 0 <= now - last < 1.0:
        _loop_errors[message] = (last, quiet + 1)
        return
    _loop_errors[message] = (now, 0)
    detail = f": {type(error).__name__}: {error}" if error is not None else ""
    more = f" ({quiet} more in the last second)" if quiet else ""
    logger.warning("%s%s%s", message, detail, more)


# --- running it ----------------------------------------------------------------------------


def _finish(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


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
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stopping: asyncio.Future[None] | None = None
    failure: list[BaseException] = []

    async def main() -> None:
        nonlocal stopping
        stopping = loop.create_future()
        try:
            await server.start(host, port)
        except BaseException as error:
            failure.append(error)
            started.set()
            return
        started.set()
        try:
            await stopping
        finally:
            await server.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    started.wait()
    if failure:
        thread.join()
        loop.close()
        raise failure[0]
    try:
        yield server
    finally:
        loop.call_soon_threadsafe(_finish, stopping)
        thread.join(timeout=10)
        loop.close()


def serve(
    index: SearchIndex,
    host: str = "127.0.0.1",
    port: int = 8000,
    topk: int = DEFAULT_TOPK,
    limits: Limits | None = None,
    ready: Callable[[RetrievalServer], None] | None = None,
) -> None:
    """Answer on ``host:port`` until SIGTERM or SIGINT (blocks); ``ready(server)`` once bound.

    In the main thread the signals are handled by the event loop, so the server stops
    between two steps of its work, closes its connections and returns.
    """
    server = RetrievalServer(index, topk=topk, limits=limits)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(number, stop.set)
        await server.start(host, port)
        if ready is not None:
            ready(server)
        try:
            await stop.wait()
        finally:
            await server.close()

    asyncio.run(main())
