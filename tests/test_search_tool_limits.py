"""The limits of the verl search tool (``reward_plugins.tools.SearchTool``) against hostile
retrieval servers: real aiohttp servers on 127.0.0.1 (a gzip bomb, an endless chunked stream, a
silent server, failing URLs), the tool built by verl's own ``initialize_tools_from_config`` from a
YAML written here, and run as verl's ``ToolAgentLoop._call_tool`` runs it (create, execute with
verl's ``AgentData``, release)."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import socket
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from verl.tools.tool_registry import initialize_tools_from_config
from verl_helpers import agent_data

from reward_plugins.errors import InvalidOption, RewardPluginsError
from reward_plugins.tools import SearchTool
from reward_plugins.tools.search import URL_VARIABLE, SearchSettings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ANSWER = {"result": [[{"document": {"id": "1", "contents": "Paris\nThe capital."}, "score": 1}]]}
ANSWER_TEXT = "Doc 1(Title: Paris) The capital."
MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def _no_url_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_VARIABLE, raising=False)


def write_yaml(tmp_path: Path, config_text: str) -> Path:
    """A verl tool YAML whose ``config`` block is ``config_text`` (YAML, one key a line)."""
    body = "".join(f"      {line}\n" for line in config_text.strip().splitlines())
    path = tmp_path / f"tools_{len(list(tmp_path.glob('tools_*.yaml')))}.yaml"
    path.write_text(
        "tools:\n"
        "  - class_name: reward_plugins.tools.SearchTool\n"
        "    config:\n"
        "      type: native\n"
        f"{body}",
        encoding="utf-8",
    )
    return path


def build(tmp_path: Path, urls: str | list[str], **config: Any) -> SearchTool:
    """The tool as verl builds it from a YAML with these config values."""
    text = yaml.safe_dump({"retrieval_service_url": urls, **config})
    (tool,) = initialize_tools_from_config(str(write_yaml(tmp_path, text)))
    assert isinstance(tool, SearchTool)
    return tool


async def call(tool: SearchTool, query: str = "capital of France") -> tuple[str, dict[str, Any]]:
    """create, execute, release: the sequence of verl's ToolAgentLoop._call_tool."""
    instance_id, _ = await tool.create(create_kwargs={})
    try:
        response, _, metrics = await tool.execute(
            instance_id, {"query": query}, agent_data=agent_data()
        )
    finally:
        await tool.release(instance_id)
    return response.text, metrics


class Server:
    """A real aiohttp server on 127.0.0.1:0 with one handler; counts requests and connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests = 0
        self.peers: set[Any] = set()
        self.url = ""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        await request.read()
        return await self.handler(request)


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[Server]:
    server = Server(handler)
    app = web.Application()
    app.router.add_post("/retrieve", server._handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}/retrieve"
    try:
        yield server
    finally:
        await runner.cleanup()


async def answer(request: web.Request) -> web.Response:
    return web.json_response(ANSWER)


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/retrieve"


# --- the config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("timeout: .nan", "timeout must be a finite number of seconds in (0, 3600], got nan"),
        ("timeout: .inf", "timeout must be a finite number of seconds in (0, 3600], got inf"),
        ("timeout: 1e400", "timeout must be a finite number of seconds in (0, 3600], got inf"),
        ("timeout: 3601", "timeout must be a number of seconds in (0, 3600], got 3601 (int)"),
        ("timeout: 0.0", "timeout must be a number of seconds in (0, 3600], got 0.0 (float)"),
        ("backoff: .inf", "backoff must be a finite number of seconds in [0, 60], got inf"),
        ("backoff: .nan", "backoff must be a finite number of seconds in [0, 60], got nan"),
        ("backoff: 61", "backoff must be a number of seconds in [0, 60], got 61 (int)"),
        ("retries: 1100", "retries must be an int in [0, 10], got 1100 (int)"),
        ("retries: " + "9" * 400, "retries must be an int in [0, 10], got a 1329-bit int (int)"),
        ("timeout: " + "9" * 400, "timeout must be a number of seconds in (0, 3600], got a 1329"),
        ("retries: 2.0", "retries must be an int in [0, 10], got 2.0 (float)"),
        ("topk: 101", "topk must be an int in [1, 100], got 101 (int)"),
        ("max_concurrency: 0", "max_concurrency must be an int in [1, 1024], got 0 (int)"),
        ("max_concurrency: 1025", "max_concurrency must be an int in [1, 1024], got 1025"),
        ("max_response_bytes: 100", "max_response_bytes must be an int in [1024, 268435456]"),
        ("max_response_bytes: true", "max_response_bytes must be an int in [1024, 268435456]"),
        ("1: x", "config keys must be strings, got 1 (int)"),
        ("retrieval_service_url: []", "retrieval_service_url must be an http(s) URL or a list"),
        (
            "retrieval_service_url: [3]",
            "retrieval_service_url must be an http(s) URL with a host, got 3",
        ),
        ("retrieval_service_url: ftp://h/x", "retrieval_service_url must be an http(s) URL with"),
        ("retrieval_service_url: 'http:///x'", "retrieval_service_url must be an http(s) URL with"),
        ("retrieval_service_url: 'http://h:99999/x'", "retrieval_service_url must be an http(s)"),
        ("retrieval_service_url: {a: 1}", "retrieval_service_url must be an http(s) URL or a list"),
    ],
)
def test_bad_config_values_are_refused_when_verl_builds_the_tool(
    tmp_path: Path, line: str, message: str
) -> None:
    path = write_yaml(tmp_path, line)
    with pytest.raises(InvalidOption, match=re.escape(message)) as raised:
        initialize_tools_from_config(str(path))
    assert isinstance(raised.value, RewardPluginsError)
    assert str(raised.value).startswith("SearchTool: ") and len(str(raised.value)) < 300


def test_too_many_urls_are_refused(tmp_path: Path) -> None:
    urls = [f"http://127.0.0.1:{9000 + n}/retrieve" for n in range(65)]
    with pytest.raises(InvalidOption, match=r"a list of 1 to 64 of them, got \[.*\(list\)"):
        build(tmp_path, urls)
    assert build(tmp_path, urls[:64]).settings.retrieval_service_url == tuple(urls[:64])


def test_the_variable_replaces_the_configured_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured = "http://127.0.0.1:8000/retrieve"
    monkeypatch.setenv(
        URL_VARIABLE, " http://10.0.0.1:8000/retrieve, http://10.0.0.2:8000/retrieve "
    )
    assert build(tmp_path, configured).settings.retrieval_service_url == (
        "http://10.0.0.1:8000/retrieve",
        "http://10.0.0.2:8000/retrieve",
    )
    monkeypatch.setenv(URL_VARIABLE, "  ")
    assert build(tmp_path, configured).settings.retrieval_service_url == (configured,)
    monkeypatch.setenv(URL_VARIABLE, "10.0.0.1:8000")
    with pytest.raises(InvalidOption, match=f"SearchTool: {URL_VARIABLE} must be an http"):
        build(tmp_path, configured)
    # the configured value is checked even when the variable replaces it
    monkeypatch.setenv(URL_VARIABLE, configured)
    with pytest.raises(InvalidOption, match="retrieval_service_url must be"):
        build(tmp_path, "nowhere")
    settings = SearchSettings.from_config({"retrieval_service_url": configured}, environ={})
    assert settings.retrieval_service_url == (configured,)


def test_the_variable_points_the_shipped_yaml_at_another_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> tuple[str, dict[str, Any]]:
        async with serving(answer) as server:
            monkeypatch.setenv(URL_VARIABLE, server.url)
            (tool,) = initialize_tools_from_config(
                str(Path(__file__).resolve().parents[1] / "reward_plugins/data/tools/search.yaml")
            )
            assert tool.settings.retrieval_service_url == (server.url,)
            return await call(tool)

    text, metrics = asyncio.run(scenario())
    assert text == ANSWER_TEXT and metrics["error"] is None


# --- the response cap --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """A valid JSON answer whose one document is 64 MiB of 'a', gzipped (about 64 KiB)."""
    head = b'{"result": [[{"id": "1", "contents": "Bomb\\n'
    inflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [inflater.compress(head)]
    block = b"a" * MiB
    parts += [inflater.compress(block) for _ in range(64)]
    parts += [inflater.compress(b'"}]]}'), inflater.flush()]
    return b"".join(parts)


def test_a_gzip_bomb_is_cut_at_the_cap(tmp_path: Path, gzip_bomb: bytes) -> None:
    assert len(gzip_bomb) < MiB // 4

    async def bomb(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip_bomb,
            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
        )

    async def scenario() -> tuple[str, dict[str, Any], int, int]:
        async with serving(bomb) as server:
            tool = build(tmp_path, server.url, max_response_bytes=MiB, retries=2, backoff=0)
            tracemalloc.start()
            try:
                text, metrics = await call(tool)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            return text, metrics, peak, server.requests

    text, metrics, peak, requests = asyncio.run(scenario())
    assert text == "Search failed: the answer exceeds 1048576 bytes once inflated."
    assert metrics["error"] == "too_large" and metrics["attempts"] == 1 and requests == 1
    assert peak < 8 * MiB  # the inflated document alone is 64 MiB


def test_an_endless_chunked_stream_is_cut_at_the_cap(tmp_path: Path) -> None:
    sent: list[int] = [0]

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        chunk = b" " * 65536
        while True:  # until the client goes away
            await response.write(chunk)
            sent[0] += len(chunk)

    async def scenario() -> tuple[str, dict[str, Any], float]:
        async with serving(endless) as server:
            tool = build(tmp_path, server.url, max_response_bytes=MiB, timeout=20)
            began = time.perf_counter()
            text, metrics = await call(tool)
            return text, metrics, time.perf_counter() - began

    text, metrics, elapsed = asyncio.run(scenario())
    assert text == "Search failed: the answer exceeds 1048576 bytes on the wire."
    assert metrics["error"] == "too_large" and metrics["attempts"] == 1
    assert elapsed < 10  # cut at the cap, long before the 20 s timeout
    assert sent[0] < 64 * MiB


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"Content-Encoding": "gzip"}, gzip.compress(json.dumps(ANSWER).encode()), ANSWER_TEXT),
        ({"Content-Encoding": "deflate"}, zlib.compress(json.dumps(ANSWER).encode()), ANSWER_TEXT),
        (
            {"Content-Encoding": "br"},
            b"\x00",
            "Search failed: unknown Content-Encoding 'br'.",
        ),
        (
            {"Content-Encoding": "gzip"},
            b"not gzip at all",
            "Search failed: a corrupt gzip body.",
        ),
        (
            {},
            json.dumps({"result": [[{"contents": "T\n" + "x" * (2 * MiB)}]]}).encode(),
            "Search failed: the answer exceeds 1048576 bytes (Content-Length).",
        ),
    ],
)
def test_encodings_and_a_declared_length_over_the_cap(
    tmp_path: Path, headers: dict[str, str], body: bytes, expected: str
) -> None:
    async def respond(request: web.Request) -> web.Response:
        assert request.headers["Accept-Encoding"] == "gzip, deflate"
        return web.Response(body=body, headers={"Content-Type": "application/json", **headers})

    async def scenario() -> tuple[str, dict[str, Any]]:
        async with serving(respond) as server:
            return await call(build(tmp_path, server.url, max_response_bytes=MiB))

    text, _ = asyncio.run(scenario())
    assert text == expected


# --- deadlines ---------------------------------------------------------------------------------


def test_the_wait_for_a_slot_counts_inside_the_deadline(tmp_path: Path) -> None:
    async def hung(request: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], float, int]:
        async with serving(hung) as server:
            tool = build(tmp_path, server.url, max_concurrency=2, timeout=1, retries=0)
            began = time.perf_counter()
            results = await asyncio.gather(*(call(tool, f"q{n}") for n in range(16)))
            return results, time.perf_counter() - began, server.requests

    results, elapsed, requests = asyncio.run(scenario())
    assert all(text == "Search failed: no answer within 1 s." for text, _ in results)
    assert all(metrics["error"] == "timeout" for _, metrics in results)
    assert max(metrics["latency_s"] for _, metrics in results) < 4  # not 8 s: 16 / 2 slots x 1 s
    assert elapsed < 6 and requests == 2  # the slots stayed taken by the two hung requests


# --- several URLs ------------------------------------------------------------------------------


def test_round_robin_over_two_servers(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], int, int]:
        async with serving(answer) as first, serving(answer) as second:
            tool = build(tmp_path, [first.url, second.url])
            texts = [(await call(tool))[0] for _ in range(6)]
            return texts, first.requests, second.requests

    texts, first, second = asyncio.run(scenario())
    assert texts == [ANSWER_TEXT] * 6 and (first, second) == (3, 3)


@pytest.mark.parametrize("failure", ["refused", "http_503", "silent"])
def test_failover_to_the_next_url(tmp_path: Path, failure: str) -> None:
    async def broken(request: web.Request) -> web.Response:
        if failure == "silent":
            await asyncio.sleep(3600)
        return web.Response(status=503)

    async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], int]:
        async with serving(broken) as bad, serving(answer) as good:
            bad_url = dead_url() if failure == "refused" else bad.url
            tool = build(tmp_path, [bad_url, good.url], retries=0, timeout=0.5)
            results = [await call(tool) for _ in range(4)]
            return results, good.requests

    results, good_requests = asyncio.run(scenario())
    assert [text for text, _ in results] == [ANSWER_TEXT] * 4
    # calls start at the bad URL and at the good one in turn; retries=0 does not stop failover
    assert [metrics["attempts"] for _, metrics in results] == [2, 1, 2, 1]
    assert good_requests == 4


def test_every_url_failing_reports_every_request(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, dict[str, Any]]:
        tool = build(tmp_path, [dead_url(), dead_url()], retries=1, backoff=0.01)
        return await call(tool)

    text, metrics = asyncio.run(scenario())
    assert text == (
        "Search failed: cannot reach the search service (ClientConnectorError), 4 attempts."
    )
    assert metrics["attempts"] == 4 and metrics["error"] == "connection"


# --- the session -------------------------------------------------------------------------------


def test_overlapping_calls_share_connections(tmp_path: Path) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)
        return web.json_response(ANSWER)

    async def scenario() -> tuple[list[tuple[str, dict[str, Any]]], int, int, SearchTool]:
        async with serving(slow) as server:
            tool = build(tmp_path, server.url, max_concurrency=2)
            results = await asyncio.gather(*(call(tool, f"q{n}") for n in range(8)))
            return results, server.requests, len(server.peers), tool

    results, requests, connections, tool = asyncio.run(scenario())
    assert [text for text, _ in results] == [ANSWER_TEXT] * 8
    assert requests == 8 and connections <= 2
    assert tool._clients == {}  # the last release closed the session


def test_close_closes_a_session_opened_without_an_instance(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, bool, bool]:
        async with serving(answer) as server:
            tool = build(tmp_path, server.url)
            response, _, _ = await tool.execute("never-created", {"query": "x"})
            (client,) = tool._clients.values()
            opened = not client.session.closed
            await tool.close()
            return response.text, opened, client.session.closed

    text, opened, closed = asyncio.run(scenario())
    assert text == ANSWER_TEXT and opened and closed


def test_the_variable_reaches_the_workers_through_verls_runtime_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The override docs/multiturn.md gives: verl's main_ppo merges
    ``ray_kwargs.ray_init.runtime_env`` over its own defaults and passes it to ``ray.init``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    monkeypatch.setenv("REWARD_PLUGINS_TOOL_CONFIG", "tools.yaml")
    urls = "http://node1:8000/retrieve,http://node2:8000/retrieve"
    configs = Path(__file__).resolve().parents[1] / "configs"
    with initialize_config_dir(config_dir=str(configs), version_base=None):
        config = compose(
            config_name="search_r1_multiturn_grpo",
            overrides=[f'+ray_kwargs.ray_init.runtime_env.env_vars.{URL_VARIABLE}="{urls}"'],
        )
    merged = OmegaConf.merge(
        get_ppo_ray_runtime_env(config), config.ray_kwargs.ray_init.runtime_env
    )
    assert merged["env_vars"][URL_VARIABLE] == urls
    settings = SearchSettings.from_config({}, environ={URL_VARIABLE: urls})
    assert settings.retrieval_service_url == tuple(urls.split(","))


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    async def scenario() -> tuple[str, dict[str, Any], int]:
        async with serving(answer) as target:

            async def redirect(request: web.Request) -> web.Response:
                return web.Response(status=307, headers={"Location": target.url})

            async with serving(redirect) as server:
                text, metrics = await call(build(tmp_path, server.url))
                return text, metrics, target.requests

    text, metrics, followed = asyncio.run(scenario())
    assert text == "Search failed: the search service answered HTTP 307."
    assert metrics["error"] == "http_status" and followed == 0
