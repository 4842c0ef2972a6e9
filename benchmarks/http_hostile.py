"""Hostile clients against three HTTP servers given the same limits: does a maintained server
hold the limits that ``reward_plugins.runtime.http`` was written for?

Each server answers ``POST /echo`` with ``{"bytes": N}`` (N: the body's length) and is given
the same limits, through its own knobs only (no application code enforces a limit):

- ``runtime.http``: :class:`reward_plugins.runtime.http.HttpServer` (asyncio + h11) with
  ``max_body_mb``, ``read_timeout``, ``idle_timeout``, ``max_connections``, ``max_requests``;
- ``aiohttp.web``: ``web.Application(client_max_size=...)``, ``web.AppRunner(...,
  keepalive_timeout=, max_line_size=, max_field_size=, lingering_time=)`` and
  ``web.TCPSite(..., backlog=)``; its handler reads the body with ``await request.read()``
  (docs: https://docs.aiohttp.org/en/stable/web_reference.html, ``Application``,
  ``AppRunner``, ``TCPSite``);
- ``uvicorn``: ``uvicorn.Config(http="h11", timeout_keep_alive=, limit_concurrency=,
  h11_max_incomplete_event_size=, backlog=)`` (docs: https://www.uvicorn.org/settings/); its
  ASGI app reads the body whole (uvicorn has no body-size setting).

Raw sockets play the clients. A scenario is *held* when the server ends the hostile client
within the limit and the way the contract of ``runtime.http`` says
(``tests/test_retriever_server.py`` is that contract): an answer (408, 413, 503) where the
client can read one, a close where it cannot, no traceback, and a well-behaved client served
meanwhile. Every cell says what was observed. The verdict rests on what happens, not on
speed: each wait has a generous budget.

    python benchmarks/http_hostile.py [--timeout 1.0] [--short] [--servers runtime.http,aiohttp.web]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

HOST = "127.0.0.1"
HEADER_CAP = 16384
"""Bytes of request line and headers every server is told to accept (runtime.http's cap)."""


@dataclass(frozen=True)
class Limits:
    """The limits every server is given (the fields of ``runtime.http``'s ``ConnectionLimits``)."""

    max_body_mb: float = 1.0
    read_timeout: float = 1.0
    idle_timeout: float = 1.0
    max_connections: int = 8
    max_requests: int = 8

    @property
    def max_body(self) -> int:
        return int(self.max_body_mb * 2**20)

    @property
    def budget(self) -> float:
        """How long a client waits for the server to act before calling the limit not held."""
        return 3 * max(self.read_timeout, self.idle_timeout) + 2.0


@dataclass(frozen=True)
class Outcome:
    """One scenario on one server: whether the limit held (``partly``: the client was ended in
    time, but not with the answer the contract asks for), and what was seen."""

    held: bool
    observed: str
    partly: bool = False

    def cell(self) -> str:
        verdict = "partly" if self.held and self.partly else "held" if self.held else "**not held**"
        return f"{verdict}: {self.observed}"


# --- the servers ---------------------------------------------------------------------------------


@contextlib.contextmanager
def in_thread(start: Callable[[], Any]) -> Iterator[int]:
    """Run ``await start()`` in a thread's own event loop; it returns ``(port, stop)``, ``stop``
    a coroutine function. Yields the port; stops the server after the block."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        state["port"], stop = await start()
        state["done"] = loop.create_future()
        ready.set()
        try:
            await state["done"]
        finally:
            await stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the server did not start within 30 s")
    try:
        yield state["port"]
    finally:
        loop.call_soon_threadsafe(state["done"].set_result, None)
        thread.join(timeout=10)
        loop.close()


def serve_http(limits: Limits) -> Any:
    """The current layer, ``reward_plugins.runtime.http``."""
    import orjson

    from reward_plugins.runtime.http import HttpServer, Refusal, Request

    async def echo(request: Request) -> bytes:
        if request.path != "/echo":
            raise Refusal(404, "no such path")
        return orjson.dumps({"bytes": len(request.body)})

    async def start() -> tuple[int, Any]:
        server = HttpServer(echo, limits, logging.getLogger("hostile.serve_http"))
        await server.start(HOST, 0)
        return server.port, server.close

    return in_thread(start)


def aiohttp_web(limits: Limits) -> Any:
    """``aiohttp.web`` with every knob that bears on these limits."""
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"bytes": len(await request.read())})

    async def start() -> tuple[int, Any]:
        app = web.Application(client_max_size=limits.max_body)
        app.router.add_post("/echo", echo)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            keepalive_timeout=limits.idle_timeout,
            max_line_size=HEADER_CAP,
            max_field_size=HEADER_CAP,
            lingering_time=limits.read_timeout,
        )
        await runner.setup()
        site = web.TCPSite(runner, HOST, 0, backlog=limits.max_connections, shutdown_timeout=1)
        await site.start()
        return runner.addresses[0][1], runner.cleanup

    return in_thread(start)


def uvicorn_server(limits: Limits) -> Any:
    """``uvicorn`` (its h11 protocol) with every setting that bears on these limits."""
    import orjson
    import uvicorn

    async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
        size, more = 0, True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        body = orjson.dumps({"bytes": size})
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def start() -> tuple[int, Any]:
        config = uvicorn.Config(
            echo,
            HOST,
            0,
            http="h11",
            lifespan="off",
            log_config=None,
            access_log=False,
            timeout_keep_alive=limits.idle_timeout,  # type: ignore[arg-type]
            limit_concurrency=limits.max_connections,
            h11_max_incomplete_event_size=HEADER_CAP,
            backlog=limits.max_connections,
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup()
        port = server.servers[0].sockets[0].getsockname()[1]

        async def stop() -> None:
            await server.shutdown()

        return port, stop

    return in_thread(start)


SERVERS: dict[str, Callable[[Limits], Any]] = {
    "runtime.http": serve_http,
    "aiohttp.web": aiohttp_web,
    "uvicorn": uvicorn_server,
}


def server_versions() -> dict[str, str]:
    """Each server's version (runtime.http: h11's, the parser it uses)."""
    return {
        "runtime.http": f"h11 {version('h11')}",
        "aiohttp.web": version("aiohttp"),
        "uvicorn": f"{version('uvicorn')}, h11 {version('h11')}",
    }


# --- raw clients ---------------------------------------------------------------------------------


def connect(port: int) -> socket.socket:
    return socket.create_connection((HOST, port), timeout=10)


def head(length: int | None = None, extra: str = "") -> bytes:
    declared = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"{declared}{extra}\r\n"
    ).encode()


def request(body: bytes = b"{}") -> bytes:
    return head(len(body)) + body


def status_of(data: bytes) -> str:
    """``"408"`` of ``HTTP/1.1 408 ...``; ``"no answer"`` when nothing came."""
    match = re.match(rb"HTTP/1\.[01] (\d{3})", data)
    return match[1].decode() if match else "no answer"


@dataclass
class Ending:
    """How a client's connection ended: what it read, when, and how."""

    data: bytes
    seconds: float
    how: str  # "closed", "reset", "open"


def listen(client: socket.socket, budget: float, drip: bytes = b"", every: float = 0.1) -> Ending:
    """Read until the server closes (or resets) the connection or ``budget`` s pass; meanwhile
    send ``drip`` one byte every ``every`` s."""
    began = time.monotonic()
    data, position, next_drip = b"", 0, began
    while (now := time.monotonic()) - began < budget:
        if position < len(drip) and now >= next_drip:
            try:
                client.sendall(drip[position : position + 1])
            except OSError:
                return Ending(data, time.monotonic() - began, "reset")
            position, next_drip = position + 1, now + every
        client.settimeout(max(0.01, min(every, next_drip - now) if drip else 0.1))
        try:
            chunk = client.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return Ending(data, time.monotonic() - began, "reset")
        if not chunk:
            return Ending(data, time.monotonic() - began, "closed")
        data += chunk
    return Ending(data, budget, "open")


def send_in_background(client: socket.socket, parts: list[bytes], half_close: bool) -> None:
    """Send ``parts`` from a thread (the server may stop reading); errors end it quietly."""

    def send() -> None:
        with contextlib.suppress(OSError):
            for part in parts:
                client.sendall(part)
            if half_close:
                client.shutdown(socket.SHUT_WR)

    threading.Thread(target=send, daemon=True).start()


def answered(port: int, body: bytes = b"{}") -> str:
    """The status a well-behaved client gets for one request on a new connection (its whole
    answer read, the connection then closed by the client)."""
    with connect(port) as client:
        client.sendall(request(body))
        data = b""
        while not re.search(rb"\r\n\r\n", data) or len(data) < answer_length(data):
            chunk = client.recv(65536)
            if not chunk:
                break
            data += chunk
        return status_of(data)


def answer_length(data: bytes) -> int:
    """The length of a whole answer whose head is in ``data`` (headers and body)."""
    head_end = data.index(b"\r\n\r\n") + 4
    match = re.search(rb"(?i)content-length: *(\d+)", data[:head_end])
    return head_end + (int(match[1]) if match else 0)


def ended(ending: Ending, limit: float) -> Outcome:
    """A timed-out client: held when the server answered or closed within ``limit`` + 1 s."""
    status = status_of(ending.data)
    if ending.how == "open":
        return Outcome(False, f"connection held {ending.seconds:.0f} s (still open)")
    said = f"{status} sent" if status != "no answer" else "closed, no answer"
    if ending.how == "reset":
        said = f"{status} sent, then reset" if status != "no answer" else "reset, no answer"
    return Outcome(ending.seconds <= limit + 1.0, f"{said} after {ending.seconds:.1f} s")


# --- the scenarios -------------------------------------------------------------------------------


def slow_headers(port: int, limits: Limits) -> Outcome:
    """Headers that drip one byte at a time: closed ``read_timeout`` after the first byte."""
    with connect(port) as client:
        client.sendall(b"POST /echo HTTP/1.1\r\nHost: test\r\n")
        ending = listen(client, limits.budget, b"X-Drip: " + b"a" * 1000, every=0.1)
    return expect_408(ended(ending, limits.read_timeout), ending)


def expect_408(outcome: Outcome, ending: Ending) -> Outcome:
    """A client ended in time but without the 408 it can read is held only partly."""
    if outcome.held and status_of(ending.data) != "408":
        return Outcome(True, outcome.observed + " (408 expected)", partly=True)
    return outcome


def slow_body(port: int, limits: Limits) -> Outcome:
    """A body that drips one byte at a time: closed ``read_timeout`` after the headers."""
    with connect(port) as client:
        client.sendall(head(1000))
        ending = listen(client, limits.budget, b"a" * 1000, every=0.1)
    return expect_408(ended(ending, limits.read_timeout), ending)


def silent(port: int, limits: Limits) -> Outcome:
    """A connection that sends nothing: closed after ``read_timeout``."""
    with connect(port) as client:
        return ended(listen(client, limits.budget), limits.read_timeout)


def idle_keep_alive(port: int, limits: Limits) -> Outcome:
    """A keep-alive connection that goes quiet after an answer: closed after ``idle_timeout``."""
    with connect(port) as client:
        client.sendall(request())
        client.settimeout(10)
        first = client.recv(65536)
        if status_of(first) != "200":
            return Outcome(False, f"first request: {status_of(first)}")
        return ended(listen(client, limits.budget), limits.idle_timeout)


def over_the_cap(port: int, limits: Limits) -> Outcome:
    """``max_connections`` open connections, then one more: 503 (with ``Retry-After``)."""
    held = [connect(port) for _ in range(limits.max_connections)]
    try:
        time.sleep(0.1)
        with connect(port) as extra:
            extra.sendall(request())
            ending = listen(extra, min(limits.read_timeout, 2.0) * 0.8)
    finally:
        for client in held:
            client.close()
    status = status_of(ending.data)
    retry = b"retry-after" in ending.data.lower()
    time.sleep(0.3)
    after = answered(port)
    if status == "503":
        note = "with Retry-After" if retry else "no Retry-After"
        return Outcome(True, f"503 sent ({note}); {after} once they closed", partly=not retry)
    if status == "no answer":
        return Outcome(False, f"the extra connection waits (no answer, {ending.how})")
    return Outcome(False, f"{status} sent: no cap on connections")


def declared_too_large(port: int, limits: Limits) -> Outcome:
    """``Content-Length`` over ``max_body_mb`` (the body follows): a readable 413."""
    size = 4 * limits.max_body
    with connect(port) as client:
        send_in_background(client, [head(size), b"a" * size], half_close=False)
        ending = listen(client, limits.budget)
    return too_large(ending, size)


def chunked_too_large(port: int, limits: Limits) -> Outcome:
    """A chunked body that grows past ``max_body_mb``: a readable 413."""
    chunk_size = 1 << 16
    count = 2 * limits.max_body // chunk_size
    chunk = b"%x\r\n%s\r\n" % (chunk_size, b"a" * chunk_size)
    with connect(port) as client:
        parts = [head(extra="Transfer-Encoding: chunked\r\n")] + [chunk] * count + [b"0\r\n\r\n"]
        send_in_background(client, parts, half_close=True)
        ending = listen(client, limits.budget)
    return too_large(ending, count * chunk_size)


def too_large(ending: Ending, size: int) -> Outcome:
    status = status_of(ending.data)
    if status == "413":
        return Outcome(True, "413 sent, readable")
    if status == "200":
        return Outcome(False, f"no 413: 200, {size >> 20} MiB read whole")
    if status != "no answer":
        return Outcome(False, f"no 413: {status} sent")
    return Outcome(False, f"no 413, connection {ending.how} after {ending.seconds:.1f} s")


class Tracebacks(logging.Handler):
    """Counts the log records with a traceback or at ERROR and above, and the others."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.errors = 0
        self.lines = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.errors += 1
        else:
            self.lines += 1


RESETS = 3


def reset_mid_body(port: int, limits: Limits) -> Outcome:
    """Clients reset in the middle of a body: no traceback, and the server serves on."""
    handler = Tracebacks()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        for _ in range(RESETS):
            client = connect(port)
            size = limits.max_body // 2
            client.sendall(head(size) + b"a" * (size // 2))
            time.sleep(0.1)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
        time.sleep(0.5)
        after = answered(port)
    finally:
        root.removeHandler(handler)
    served = f"then {after}" if after == "200" else f"then no service ({after})"
    if handler.errors:
        return Outcome(
            False, f"{handler.errors} error lines/tracebacks for {RESETS} resets; {served}"
        )
    return Outcome(after == "200", f"{handler.lines} log lines, no traceback; {served}")


def served_among_hostile(port: int, limits: Limits) -> Outcome:
    """Half the connection cap dripping headers or a body: a well-behaved client is served."""
    hostile = [connect(port) for _ in range(limits.max_connections // 2)]
    try:
        for number, client in enumerate(hostile):
            client.sendall(head(1000) + b"a" if number % 2 else b"POST /echo HTTP/1.1\r\n")
        time.sleep(0.05)
        began = time.monotonic()
        status = answered(port)
        seconds = time.monotonic() - began
    finally:
        for client in hostile:
            client.close()
    note = f"{status} in {seconds * 1000:.0f} ms beside {len(hostile)} hostile connections"
    return Outcome(status == "200", note)


SCENARIOS: dict[str, Callable[[int, Limits], Outcome]] = {
    "slow-drip headers (408)": slow_headers,
    "slow-drip body": slow_body,
    "silent connection": silent,
    "idle keep-alive": idle_keep_alive,
    "connections over the cap (503)": over_the_cap,
    "413 by Content-Length": declared_too_large,
    "413 by chunked growth": chunked_too_large,
    "reset mid-body": reset_mid_body,
    "served beside hostile clients": served_among_hostile,
}


def run_suite(server: str, limits: Limits) -> dict[str, Outcome]:
    """Every scenario against one server (started for the suite with ``limits``)."""
    outcomes = {}
    with SERVERS[server](limits) as port:
        for name, scenario in SCENARIOS.items():
            try:
                outcomes[name] = scenario(port, limits)
            except OSError as error:
                outcomes[name] = Outcome(False, f"client error: {type(error).__name__}: {error}")
    return outcomes


def table(results: dict[str, dict[str, Outcome]]) -> str:
    """A Markdown table: a row per scenario, a column per server."""
    names = list(results)
    versions = server_versions()
    lines = [
        "| scenario | " + " | ".join(f"{name} ({versions[name]})" for name in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for scenario in SCENARIOS:
        cells = [results[name][scenario].cell() for name in names]
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=1.0, help="read and idle timeout, s")
    parser.add_argument("--short", action="store_true", help="timeouts of 0.3 s (a quick run)")
    parser.add_argument("--servers", default=",".join(SERVERS), help="comma-separated")
    args = parser.parse_args(argv)
    servers = args.servers.split(",")
    if unknown := [name for name in servers if name not in SERVERS]:
        parser.error(f"unknown server(s) {', '.join(unknown)}; choose from {', '.join(SERVERS)}")
    timeout = 0.3 if args.short else args.timeout
    limits = Limits(read_timeout=timeout, idle_timeout=timeout)
    logging.getLogger().addHandler(logging.NullHandler())  # the suite counts records, shows none
    logging.getLogger().setLevel(logging.DEBUG)
    results = {name: run_suite(name, limits) for name in servers}
    print(
        f"limits: body {limits.max_body_mb:g} MiB, read/idle timeout {timeout:g} s, "
        f"{limits.max_connections} connections; Python {sys.version.split()[0]}"
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
