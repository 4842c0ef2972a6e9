"""A hardened HTTP/1.1 server for JSON APIs, that no client can stall: the retriever's and the
reward server's.

One event loop (asyncio, HTTP/1.1 parsed by h11: github.com/python-hyper/h11) holds every
connection and hands each whole request to an async handler, which answers a JSON body (200) or
raises :class:`Refusal` (answered ``{"error": message}`` with its status and headers). What
it bounds, each from the ``limits`` it is given (the servers' CLI options of the same names):

- ``max_body_mb``: a body over it is answered 413 (from ``Content-Length`` before it is read,
  else as soon as it passes the cap), and the rest of it is read and dropped so that the client
  reads the answer instead of a broken pipe;
- ``read_timeout``: a request's headers and body must arrive within it (408), and an answer
  must leave within it; ``idle_timeout``: a keep-alive connection waiting longer is closed;
  slow-dripping clients cannot hold a connection;
- ``max_connections`` open connections and ``max_requests`` requests being answered; beyond,
  503 with ``Retry-After``; the soft limit on open files is raised to fit the connections, and
  running out of descriptors is logged once a second rather than spun on;
- request line and headers: :data:`MAX_HEADER_BYTES` (431).

Every failure is one log line on the server's logger; a client that goes away is no traceback.

Neither aiohttp.web nor uvicorn holds all of these limits through its own settings (no body read
timeout, no connection cap, no 413 or no 408): ``benchmarks/http_hostile.py`` plays the hostile
clients against all three, and ``docs/serving.md`` ("The HTTP layer") has its table.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import orjson

from reward_plugins.errors import InvalidInput, RewardPluginsError
from reward_plugins.options import is_finite_number

LINGER_BYTES = 1 << 30
"""The most bytes of a refused request read (and dropped) before its connection is closed."""

LINGER_QUIET = 0.5
"""Seconds without a byte from a refused client after which its connection is closed."""

MAX_HEADER_BYTES = 16384
"""A request line and headers still incomplete past this many bytes are refused (431)."""


class Refusal(RewardPluginsError):
    """A request answered with an error: ``status``, a one-line message, extra headers."""

    def __init__(self, status: int, message: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.headers = list(headers)


@dataclass(frozen=True)
class Request:
    """One whole request as a handler gets it: the method, the path (no query string), the
    body (at most ``max_body_mb``)."""

    method: str
    path: str
    body: bytes


Handler = Callable[[Request], Awaitable[bytes]]
"""Answers a request with a JSON body (status 200), or raises :class:`Refusal`."""


class ConnectionLimits(Protocol):
    """What :class:`HttpServer` reads of its limits (the servers' ``Limits`` dataclasses)."""

    @property
    def max_body_mb(self) -> float: ...
    @property
    def read_timeout(self) -> float: ...
    @property
    def idle_timeout(self) -> float: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def max_requests(self) -> int: ...


def limit(default: Any, help: str) -> Any:
    """A field of a server's limits dataclass: its default and its CLI option's help."""
    return dataclasses.field(default=default, metadata={"help": help})


def check_limits(limits: Any, zero_allowed: Sequence[str] = ()) -> None:
    """Refuse a limits dataclass with a field that is not a finite number (an int where the
    field is an int) from 1 (ints) or 0.001 (floats), or 0 for the fields ``zero_allowed``, up
    to 1e9.

    Raises:
        InvalidInput: naming the field and the value's type.
    """
    for spec in dataclasses.fields(limits):
        value = getattr(limits, spec.name)
        integer = spec.type == "int"
        low = 0 if spec.name in zero_allowed else 1 if integer else 1e-3
        numeric = is_finite_number(value)
        if not numeric or (integer and not isinstance(value, int)) or not low <= value < 1e9:
            kind = "an int" if integer else "a number"
            raise InvalidInput(
                f"{spec.name}: expected {kind} of at least {low:g}, got {value!r} "
                f"({type(value).__name__})"
            )


def overloaded(message: str) -> Refusal:
    """A 503 with ``Retry-After: 1``: the answer to a request the server has no room for."""
    return Refusal(HTTPStatus.SERVICE_UNAVAILABLE, message, [("Retry-After", "1")])


def body_too_large(limit: int, declared: int | None = None) -> Refusal:
    """The 413 of a body over ``limit`` bytes (``declared``: its announced ``Content-Length``)."""
    size = f"{declared} bytes, over" if declared is not None else "over"
    unit = "" if declared is not None else " bytes"
    return Refusal(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        f"the body is {size} {limit}{unit} (--max-body-mb)",
    )


class HttpServer:
    """Serves ``handler`` on one port within ``limits``; log lines go to ``logger``.

    Use :meth:`start` (in a running event loop) then :meth:`close`; :func:`running_in_thread`
    and :func:`serve_until_signal` run any object with those two methods.
    """

    def __init__(self, handler: Handler, limits: ConnectionLimits, logger: logging.Logger) -> None:
        try:  # here, before a server spends time starting: every connection needs it
            import h11  # noqa: F401
        except ImportError:
            raise ImportError(
                "the HTTP server needs h11: pip install 'reward-plugins[serve]' (or [search])"
            ) from None
        self.limits = limits
        self._handler = handler
        self._logger = logger
        self._server: asyncio.Server | None = None
        self.connections = 0
        """Connections open now."""
        self.requests = 0
        """Requests being answered now."""
        self.counters: dict[str, int] = {"answered": 0, "refused": 0, "overloaded": 0}
        """Requests answered (200), refused (an error status), overloaded (503 for room)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.host = ""
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind ``host:port`` (0: a free port, see :attr:`port`) and start accepting."""
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(
            lambda loop, context: _log_loop_error(loop, context, self._logger)
        )
        _raise_descriptor_limit(self.limits.max_connections + 256, self._logger)
        self._server = await asyncio.start_server(
            self._connection, host, port, backlog=min(4096, self.limits.max_connections)
        )
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        """Stop accepting and close the connections (their handlers are cancelled)."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1.0)

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the bound socket."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}"

    # --- connections -----------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h11

        peer = _peer(writer)
        if self.connections >= self.limits.max_connections:
            self.counters["overloaded"] += 1
            writer.write(_raw_overload(f"over {self.limits.max_connections} connections"))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), LINGER_QUIET)
                await self._linger(reader, within=LINGER_QUIET)
            await _close(writer)
            return
        self.connections += 1
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
            self._logger.info("%s: the client went away (%s)", peer, type(error).__name__)
        except (TimeoutError, asyncio.TimeoutError):
            self._logger.info(
                "%s: closed, too slow (read timeout %gs)", peer, self.limits.read_timeout
            )
            with contextlib.suppress(Exception):
                late = f"the request did not arrive within {self.limits.read_timeout:g} s"
                refusal = Refusal(HTTPStatus.REQUEST_TIMEOUT, f"{late} (--read-timeout)")
                await self._send(connection, writer, refusal, keep_alive=False)
        except h11.RemoteProtocolError as error:
            self._logger.info("%s: not HTTP/1.1 (%s)", peer, error)
            with contextlib.suppress(Exception):
                refusal = Refusal(error.error_status_hint, f"not HTTP/1.1: {error}")
                await self._send(connection, writer, refusal, keep_alive=False)
                await self._linger(reader)
        finally:
            self.connections -= 1
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
            if self.requests >= self.limits.max_requests:
                self.counters["overloaded"] += 1
                raise Refusal(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"over {self.limits.max_requests} requests in progress; retry shortly",
                    [("Retry-After", "1")],
                )
            self.requests += 1
            try:
                target = urlsplit(event.target.decode("latin-1")).path
                request = Request(event.method.decode("latin-1"), target, body)
                answer = await self._handler(request)
            finally:
                self.requests -= 1
        except Refusal as refusal:
            self.counters["refused"] += 1
            keep = refusal.status < 500 and connection.their_state is h11.DONE
            await self._send(connection, writer, refusal, keep_alive=keep)
            if connection.their_state is not h11.DONE:
                await self._linger(reader)
            return keep
        self.counters["answered"] += 1
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
            raise body_too_large(limit, int(declared))
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
                    raise body_too_large(limit)
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
        answer: bytes | Refusal,
        keep_alive: bool = True,
    ) -> None:
        import h11

        headers = [("Content-Type", "application/json; charset=utf-8")]
        if isinstance(answer, Refusal):
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


def _raise_descriptor_limit(wanted: int, logger: logging.Logger) -> None:
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


def _log_loop_error(
    loop: asyncio.AbstractEventLoop, context: dict[str, Any], logger: logging.Logger
) -> None:
    """The event loop's errors (e.g. out of file descriptors on accept) in one line each, at
    most one line per second per message: the loop reports each failed accept of a burst. A
    cancellation is not an error."""
    error = context.get("exception")
    if isinstance(error, asyncio.CancelledError):
        # a connection handler cancelled by close(): Python 3.11's start_server callback asks
        # the cancelled task for its exception and reports the CancelledError (3.12 does not)
        return
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


class Startable(Protocol):
    async def start(self, host: str, port: int) -> None: ...
    async def close(self) -> None: ...


S = TypeVar("S", bound=Startable)


def _finish(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


@contextlib.contextmanager
def running_in_thread(server: S, host: str = "127.0.0.1", port: int = 0) -> Iterator[S]:
    """``server`` started on ``host:port`` in a background thread (its own event loop) for the
    block, then closed; an error of its start is raised here."""
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


def serve_until_signal(
    server: S, host: str, port: int, ready: Callable[[S], None] | None = None
) -> None:
    """Serve on ``host:port`` until SIGTERM or SIGINT (blocks); ``ready(server)`` once bound.

    In the main thread the signals are handled by the event loop, so the server stops
    between two steps of its work, closes its connections and returns.
    """

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
