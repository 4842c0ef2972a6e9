"""The verl search tool (``reward_plugins.tools.SearchTool``), end to end over loopback HTTP
against the package's retriever (``reward_plugins.search``); nothing is mocked.

The servers are real: the package's retrieval server in a thread, and small scripted HTTP
servers (silent, garbage, failing, counting) for the failure modes. The tool is loaded with
verl's own ``initialize_tools_from_config`` from a copy of the shipped YAML, and is handed verl's
own ``AgentData`` (``verl/experimental/agent_loop/tool_agent_loop.py``), as the agent loop does.
Protocol: Search-R1 (github.com/PeterGriffinJin/Search-R1, search_r1/search/retrieval_server.py).
"""

from __future__ import annotations

import asyncio
import doctest
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl.tools.tool_registry import initialize_tools_from_config
from verl_helpers import agent_data

import reward_plugins.tools.search as search_module
from reward_plugins.cli import main as cli_main
from reward_plugins.errors import InvalidOption
from reward_plugins.search.corpus import sample_corpus_path
from reward_plugins.search.index import SearchIndex
from reward_plugins.search.server import RetrievalServer, running_server
from reward_plugins.tools import SearchTool

REPO = Path(__file__).resolve().parents[1]
SHIPPED_YAML = REPO / "reward_plugins" / "data" / "tools" / "search.yaml"

PARIS = (
    "Doc 1(Title: Paris) Paris is the capital of France and the largest city of the country. "
    "The French capital lies on the river Seine and is known for the Eiffel Tower, the Louvre and "
    "Notre-Dame cathedral.\n"
    "Doc 2(Title: France) France is a republic in Western Europe bordered by Spain, Italy, Germany "
    "and Belgium. Its currency is the euro and its official language is French.\n"
    "Doc 3(Title: Tour de France) The Tour de France is an annual multi-stage bicycle race held "
    "mainly on French roads, first run in 1903."
)
"""The tool's text for "What is the capital of France?" on the shipped sample, topk 3."""


# --- helpers -----------------------------------------------------------------------------------


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def post(url: str, body: bytes | Any, method: str = "POST") -> tuple[int, Any]:
    """``(status, decoded JSON body)`` of one request; ``body`` bytes are sent as they are."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data if method == "POST" else None, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def start(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def load_tool(tmp_path: Path, url: str, **config: Any) -> SearchTool:
    """The tool as verl builds it: a copy of the shipped YAML with ``url`` and ``config``."""
    tools_config = yaml.safe_load(SHIPPED_YAML.read_text())
    tools_config["tools"][0]["config"].update({"retrieval_service_url": url, **config})
    path = tmp_path / f"search_{len(list(tmp_path.glob('search_*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(tools_config))
    (tool,) = initialize_tools_from_config(str(path))
    assert isinstance(tool, SearchTool)
    return tool


async def call(tool: SearchTool, parameters: Any, data: Any = None) -> tuple[Any, float, dict]:
    """create, execute, release: the sequence of verl's ToolAgentLoop._call_tool."""
    instance_id, created = await tool.create(create_kwargs={})
    assert created.is_empty()
    try:
        return await tool.execute(instance_id, parameters, agent_data=data)  # type: ignore[no-any-return]
    finally:
        await tool.release(instance_id)


class Scripted(ThreadingHTTPServer):
    """A real HTTP server whose every answer is ``respond(request_number)``:
    ``(status, body bytes, delay s)``; it counts requests and the most it had in flight."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, respond: Callable[[int], tuple[int, bytes, float]]) -> None:
        self.respond = respond
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/retrieve"


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: Scripted

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.requests += 1
            number = self.server.requests
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        status, body, delay = self.server.respond(number)
        time.sleep(delay)
        with self.server.lock:
            self.server.in_flight -= 1
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    servers: list[Scripted] = []

    def make(respond: Callable[[int], tuple[int, bytes, float]]) -> Scripted:
        server = Scripted(respond)
        start(server)
        servers.append(server)
        return server

    yield make
    for server in servers:
        stop(server)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RetrievalServer]:
    """The package's retriever over the shipped sample corpus, on a free loopback port."""
    index = SearchIndex.for_corpus(sample_corpus_path(), cache_dir=tmp_path_factory.mktemp("idx"))
    with running_server(index) as running:
        yield running


def test_docstring_examples() -> None:
    failures, tried = doctest.testmod(search_module)
    assert tried > 0 and failures == 0, search_module.__name__


# --- the tool ----------------------------------------------------------------------------------


def test_tool_through_verls_loader_formats_like_search_r1(
    tmp_path: Path, server: RetrievalServer
) -> None:
    tool = load_tool(tmp_path, server.url)
    assert tool.name == "search"
    schema = tool.get_openai_tool_schema().model_dump()
    assert schema["function"]["parameters"]["required"] == ["query"]
    data = agent_data()
    response, reward, metrics = run(call(tool, {"query": "What is the capital of France?"}, data))
    assert response.text == PARIS and reward == 0.0
    assert metrics["queries"] == 1 and metrics["documents"] == 3 and metrics["attempts"] == 1
    assert metrics["error"] is None and 0 < metrics["latency_s"] < 10
    # a second call of the trajectory (two queries) accumulates
    response, _, metrics = run(
        call(tool, {"query_list": ["What is the capital of France?", "zzzz qqqq"]}, data)
    )
    assert response.text == PARIS + "\n---\nNo documents found."
    assert metrics["documents"] == 3
    assert data.extra_fields["search_queries"] == [
        "What is the capital of France?",
        "What is the capital of France?",
        "zzzz qqqq",
    ]
    assert data.extra_fields["search_documents"] == [3, 3]
    assert data.extra_fields["search_errors"] == [None, None]
    latencies = data.extra_fields["search_latency_s"]
    assert len(latencies) == 2 and all(0 < latency < 10 for latency in latencies)
    assert set(data.extra_fields) == set(search_module.EXTRA_FIELDS)
    # without agent_data nothing is recorded and nothing fails
    response, _, _ = run(call(tool, {"query": "What is the capital of France?"}))
    assert response.text == PARIS


def test_tool_topk_and_instances(tmp_path: Path, server: RetrievalServer) -> None:
    tool = load_tool(tmp_path, server.url, topk=1)
    response, _, _ = run(call(tool, {"query": "Who wrote Hamlet?"}))
    assert response.text == (
        "Doc 1(Title: Hamlet) Hamlet is a tragedy written by William Shakespeare around 1600. "
        "Prince Hamlet of Denmark seeks revenge on his uncle Claudius, who murdered his father."
    )

    async def lifecycle() -> tuple[str, str]:
        given, _ = await tool.create("mine")
        fresh, _ = await tool.create()
        await tool.release(given)
        await tool.release(given)  # a second release is harmless
        await tool.release(fresh)
        return given, fresh

    given, fresh = run(lifecycle())
    assert given == "mine" and fresh != "mine" and len(fresh) == 36
    assert tool._instances == {}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({}, 'give "query" (a string) or "query_list" (strings); got keys: none'),
        ({"q": "paris"}, 'give "query" (a string) or "query_list" (strings); got keys: q'),
        (
            {"query": "a", "query_list": ["b"]},
            'give "query" (a string) or "query_list" (strings); got keys: query, query_list',
        ),
        (
            {"query": "paris", "topk": 5},
            'give "query" (a string) or "query_list" (strings); got keys: query, topk',
        ),
        ({"query": 3}, '"query" must be a string, got int'),
        ({"query": "  "}, "a query must not be empty"),
        ({"query_list": []}, '"query_list" must be a non-empty list of strings'),
        ({"query_list": "paris"}, '"query_list" must be a non-empty list of strings'),
        ({"query_list": ["paris", None]}, '"query_list" must hold strings only'),
        ("paris", "the arguments must be a JSON object, got str"),
    ],
)
def test_tool_invalid_arguments_are_told_to_the_model(
    tmp_path: Path, server: RetrievalServer, parameters: Any, message: str
) -> None:
    tool = load_tool(tmp_path, server.url)
    data = agent_data()
    response, reward, metrics = run(call(tool, parameters, data))
    assert response.text == f"Search failed: invalid arguments: {message}."
    assert reward == 0.0 and metrics["error"] == "invalid_arguments" and metrics["attempts"] == 0
    assert data.extra_fields["search_errors"] == ["invalid_arguments"]
    assert data.extra_fields["search_queries"] == [] and data.extra_fields["search_documents"] == [
        0
    ]


def test_tool_times_out_on_a_silent_server(
    tmp_path: Path, scripted: Callable[..., Scripted]
) -> None:
    silent = scripted(lambda number: (200, b'{"result": [[]]}', 3.0))
    tool = load_tool(tmp_path, silent.url, timeout=0.4, retries=1, backoff=0.1)
    data = agent_data()
    began = time.perf_counter()
    response, reward, metrics = run(call(tool, {"query": "paris"}, data))
    elapsed = time.perf_counter() - began
    assert response.text == "Search failed: no answer within 0.4 s, 2 attempts."
    assert reward == 0.0 and metrics["error"] == "timeout" and metrics["attempts"] == 2
    assert 0.4 * 2 + 0.1 <= elapsed < 0.4 * 2 + 0.1 + 1.0  # timeout x (retries + 1) + backoff
    assert silent.requests == 2
    assert data.extra_fields["search_errors"] == ["timeout"]
    assert data.extra_fields["search_queries"] == ["paris"]


def test_tool_on_a_refused_connection(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/retrieve"
    tool = load_tool(tmp_path, url, retries=2, backoff=0.05)
    began = time.perf_counter()
    response, _, metrics = run(call(tool, {"query": "paris"}, agent_data()))
    assert time.perf_counter() - began >= 0.05 + 0.1  # two backoffs: 0.05, then 0.1
    assert response.text == (
        "Search failed: cannot reach the search service (ClientConnectorError), 3 attempts."
    )
    assert metrics["error"] == "connection" and metrics["attempts"] == 3


@pytest.mark.parametrize(
    ("status", "body", "text", "kind", "requests"),
    [
        (200, b"<html>oops</html>", "the search service answered non-JSON", "bad_response", 1),
        (200, b'{"result": "x"}', "expected a result list of 1 item(s)", "bad_response", 1),
        (200, b'{"result": [[], []]}', "expected a result list of 1 item(s)", "bad_response", 1),
        (200, b'{"docs": [[]]}', "expected a result list of 1 item(s)", "bad_response", 1),
        (200, b"[1]", "expected a result list of 1 item(s)", "bad_response", 1),
        (200, b'{"result": [{"id": "1"}]}', "a query's result is not a list", "bad_response", 1),
        (
            200,
            b'{"result": [[{"document": {"id": "1"}, "score": 1}]]}',
            "a document has no 'contents' string",
            "bad_response",
            1,
        ),
        (200, b'{"result": [["text"]]}', "a document has no 'contents' string", "bad_response", 1),
        (400, b'{"error": "bad"}', "the search service answered HTTP 400", "http_status", 1),
        (404, b"", "the search service answered HTTP 404", "http_status", 1),
        (503, b"", "the search service answered HTTP 503, 3 attempts", "http_status", 3),
        (429, b"", "the search service answered HTTP 429, 3 attempts", "http_status", 3),
    ],
)
def test_tool_on_garbage_and_http_errors(
    tmp_path: Path,
    scripted: Callable[..., Scripted],
    status: int,
    body: bytes,
    text: str,
    kind: str,
    requests: int,
) -> None:
    bad = scripted(lambda number: (status, body, 0.0))
    tool = load_tool(tmp_path, bad.url, retries=2, backoff=0.01)
    response, reward, metrics = run(call(tool, {"query": "paris"}, agent_data()))
    assert response.text == f"Search failed: {text}."
    assert reward == 0.0 and metrics["error"] == kind and metrics["attempts"] == requests
    assert bad.requests == requests


def test_tool_recovers_after_a_failed_attempt(
    tmp_path: Path, scripted: Callable[..., Scripted]
) -> None:
    # the first answer is a 502, the second a Search-R1 answer without scores
    answer = {"result": [[{"id": "9", "contents": "Vienna\nOn the Danube.\nSecond line."}]]}
    flaky = scripted(
        lambda number: (502, b"", 0.0) if number == 1 else (200, json.dumps(answer).encode(), 0.0)
    )
    tool = load_tool(tmp_path, flaky.url, retries=1, backoff=0.01)
    response, _, metrics = run(call(tool, {"query": "vienna"}, agent_data()))
    assert response.text == "Doc 1(Title: Vienna) On the Danube.\nSecond line."
    assert metrics["attempts"] == 2 and metrics["error"] is None and flaky.requests == 2


@pytest.mark.parametrize("limit", [1, 3])
def test_tool_keeps_at_most_max_concurrency_requests_in_flight(
    tmp_path: Path, scripted: Callable[..., Scripted], limit: int
) -> None:
    answer = json.dumps({"result": [[{"document": {"id": "1", "contents": "T\nx"}, "score": 1}]]})
    counting = scripted(lambda number: (200, answer.encode(), 0.15))
    tool = load_tool(tmp_path, counting.url, max_concurrency=limit)

    async def many() -> list[Any]:
        return await asyncio.gather(*(call(tool, {"query": f"q{i}"}) for i in range(8)))

    for _ in range(2):  # a fresh event loop gets its own semaphore
        results = run(many())
        assert [response.text for response, _, _ in results] == ["Doc 1(Title: T) x"] * 8
    assert counting.requests == 16 and counting.max_in_flight == limit


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"topk": 0}, "topk must be an int in [1, 100], got 0 (int)"),
        ({"topk": "3"}, "topk must be an int in [1, 100], got '3' (str)"),
        ({"retries": -1}, "retries must be an int in [0, 10], got -1"),
        ({"max_concurrency": True}, "max_concurrency must be an int in [1, 1024], got True"),
        ({"timeout": 0}, "timeout must be a number of seconds in (0, 3600], got 0"),
        ({"timeout": "30"}, "timeout must be a number of seconds in (0, 3600], got '30' (str)"),
        ({"backoff": -0.5}, "backoff must be a number of seconds in [0, 60], got -0.5"),
        ({"retrieval_service_url": "localhost:8000"}, "retrieval_service_url must be an http(s)"),
        ({"top_k": 3}, "unknown config key(s) 'top_k'; valid: backoff, max_concurrency"),
    ],
)
def test_tool_config_is_checked(tmp_path: Path, config: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOption, match=re.escape(message)):
        load_tool(tmp_path, "http://127.0.0.1:1/retrieve", **config)


def test_tool_defaults_without_config_or_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(search_module.URL_VARIABLE, raising=False)
    tool = SearchTool({"type": "native"}, None)
    assert tool.name == "search"
    assert tool.settings == search_module.SearchSettings(
        retrieval_service_url=("http://127.0.0.1:8000/retrieve",),
        topk=3,
        timeout=30.0,
        retries=2,
        backoff=0.5,
        max_concurrency=16,
        max_response_bytes=4 * 1024 * 1024,
    )
    shipped = yaml.safe_load(SHIPPED_YAML.read_text())["tools"][0]
    assert shipped["tool_schema"] == search_module.DEFAULT_SCHEMA
    (url,) = tool.settings.retrieval_service_url
    assert shipped["config"] == {
        "type": "native",
        **vars(tool.settings),
        "retrieval_service_url": url,
    }


# --- the command line --------------------------------------------------------------------------


def test_cli_path_tool_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["path", "tool-config"]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed.is_file() and printed.name == "search.yaml"
    assert printed.read_text() == SHIPPED_YAML.read_text()
