"""The retrieval server (``reward_plugins.search.server``) and ``reward-plugins retriever
serve``: Search-R1's protocol, the caps, the deadline, the timeouts, the connection and request
bounds, the cache, the logs; all over loopback HTTP against real indexes, nothing mocked.

Protocol: Search-R1 (github.com/PeterGriffinJin/Search-R1, search_r1/search/retrieval_server.py).
Raw sockets play the hostile clients (slow drips, early disconnects, oversized bodies).
"""

from __future__ import annotations

import doctest
import json
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import reward_plugins.search.server as server_module
from reward_plugins.errors import InvalidInput
from reward_plugins.search.corpus import sample_corpus_path
from reward_plugins.search.index import MANIFEST_NAME, SearchIndex, build_index
from reward_plugins.search.server import Limits, RetrievalServer, _ResultCache, running_server

REPO = Path(__file__).resolve().parents[1]


def post(url: str, body: bytes | Any, method: str = "POST", timeout: float = 30) -> Any:
    """``(status, decoded JSON body, headers)`` of one request; bytes are sent as they are."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data if method == "POST" else None, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def raw_request(body: bytes, path: str = "/retrieve", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def connect(server: RetrievalServer) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def receive_all(connection: socket.socket) -> bytes:
    data = b""
    while chunk := connection.recv(65536):
        data += chunk
    return data


def read_response(connection: socket.socket) -> bytes:
    """One whole response (headers and ``Content-Length`` bytes of body) off a connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"Content-Length: (\d+)", head)[1])  # type: ignore[index]
    while len(body) < length:
        body += connection.recv(65536)
    return head + b"\r\n\r\n" + body


def questions(count: int) -> list[str]:
    """``count`` distinct questions (distinct analyzed terms: none is answered from the cache)."""
    return [f"What is known about the thing number {n} of Paris?" for n in range(count)]


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> SearchIndex:
    return SearchIndex.for_corpus(sample_corpus_path(), cache_dir=tmp_path_factory.mktemp("idx"))


@pytest.fixture(scope="module")
def server(sample_index: SearchIndex) -> Iterator[RetrievalServer]:
    with running_server(sample_index) as running:
        yield running


# --- the protocol ------------------------------------------------------------------------------


def test_answers_in_search_r1_shape_with_scores(
    server: RetrievalServer, sample_index: SearchIndex
) -> None:
    queries = ["What is the capital of France?", "Who wrote Hamlet?"]
    status, body, headers = post(server.url, {"queries": queries, "topk": 2, "return_scores": True})
    assert status == 200 and list(body) == ["result"] and len(body["result"]) == 2
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    expected = sample_index.search(queries, 2)
    for hits, wanted in zip(body["result"], expected, strict=True):
        assert [hit["document"] for hit in hits] == [document for document, _ in wanted]
        assert [hit["score"] for hit in hits] == [score for _, score in wanted]
        assert all(set(hit) == {"document", "score"} for hit in hits)
    assert body["result"][0][0]["document"]["contents"].startswith("Paris\n")
    assert set(body["result"][1][0]["document"]) == {"id", "contents"}


def test_answers_documents_only_by_default(server: RetrievalServer) -> None:
    status, body, _ = post(server.url, {"queries": ["Who painted the Mona Lisa?"]})
    assert status == 200
    (documents,) = body["result"]
    assert len(documents) == 3  # the server's topk
    assert documents[0]["contents"].split("\n")[0] == "Mona Lisa"
    assert all(set(document) == {"id", "contents"} for document in documents)
    for topk, count in ((None, 3), (1, 1), (5, 5), (100, 100)):
        request = {"queries": ["capital city"], "topk": topk, "return_scores": False}
        status, body, _ = post(server.url + "?x=1", request)
        assert status == 200 and len(body["result"][0]) == min(count, 58)  # 58 share a word
    assert post(server.url, {"queries": []})[:2] == (200, {"result": []})


@pytest.mark.parametrize(
    "query", ['AND ( "', "title:x", "contents:paris", "*", "paris^10", "\\", "\x00", "🙂" * 100]
)
def test_hostile_queries_are_plain_words(server: RetrievalServer, query: str) -> None:
    status, body, _ = post(server.url, {"queries": [query, "paris"]})
    assert status == 200 and len(body["result"]) == 2
    assert body["result"][1][0]["contents"].startswith("Paris\n")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "the body is not JSON"),
        (b"\xff\xfe", 400, "the body is not JSON"),
        (b"", 400, "the body is not JSON"),
        (b'{"queries": ["\\ud800"]}', 400, "the body is not JSON"),  # a lone surrogate
        (b"[" * 5000 + b"]" * 5000, 400, "the body is not JSON"),
        (b"[]", 400, "the body must be a JSON object, got list"),
        (b"{}", 400, "'queries' must be a list of strings, got missing"),
        (b'{"queries": "paris"}', 400, "'queries' must be a list of strings, got a str"),
        (b'{"queries": ["a", 1]}', 400, "'queries' must be a list of strings, got a list"),
        (b'{"queries": ["a"], "topk": 0}', 400, "'topk' must be an integer of at least 1, got 0"),
        (b'{"queries": ["a"], "topk": "3"}', 400, "'topk' must be an integer of at least 1"),
        (b'{"queries": ["a"], "topk": true}', 400, "'topk' must be an integer of at least 1"),
        (b'{"queries": ["a"], "topk": 2.0}', 400, "'topk' must be an integer of at least 1"),
        (b'{"queries": ["a"], "topk": NaN}', 400, "the body is not JSON"),
        (b'{"queries": ["a"], "topk": 1' + b"0" * 400 + b"}", 400, "the body is not JSON"),
        (b'{"queries": ["a"], "topk": 1000000000}', 400, "'topk' is 1000000000, over 100"),
        (b'{"queries": ["a"], "return_scores": 1}', 400, "'return_scores' must be true or false"),
    ],
)  # fmt: skip
def test_refuses_bad_requests(
    server: RetrievalServer, body: bytes, status: int, message: str
) -> None:
    answered, error, _ = post(server.url, body)
    assert answered == status and list(error) == ["error"] and message in error["error"]


def test_other_paths_methods_and_health(server: RetrievalServer, sample_index: SearchIndex) -> None:
    root = server.url.removesuffix("/retrieve")
    assert post(root + "/search", {"queries": ["a"]})[:2] == (
        404,
        {"error": "no such path: /search"},
    )
    assert post(root + "/", b"", method="GET")[:2] == (404, {"error": "no such path: /"})
    status, error, headers = post(server.url, b"", method="GET")
    assert (status, error, headers["Allow"]) == (405, {"error": "use POST"}, "POST")
    status, health, _ = post(server.health_url, b"", method="GET")
    assert status == 200 and health["status"] == "ok" and health["documents"] == 228
    assert health["index"] == str(sample_index.path) and health["topk"] == 3
    assert health["common_df"] is None  # exact BM25
    assert set(health["cache"]) == {"entries", "bytes", "limit_bytes", "hits", "misses", "shared"}
    assert health["limits"]["max_topk"] == 100 and health["limits"]["max_body_mb"] == 16.0


# --- the caps ----------------------------------------------------------------------------------


def test_an_oversize_body_gets_a_readable_413(server: RetrievalServer) -> None:
    body = b'{"queries": ["' + b"a" * (17 * 2**20) + b'"]}'
    status, error, _ = post(server.url, body)
    assert status == 413
    assert error == {"error": f"the body is {len(body)} bytes, over 16777216 (--max-body-mb)"}
    # a chunked body is counted as it arrives
    with connect(server) as connection:
        head = b"POST /retrieve HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunk = b"%x\r\n%s\r\n" % (2**20, b"a" * 2**20)
        connection.sendall(head)
        for _ in range(20):  # refused after 16 MiB: the server reads and drops the rest
            connection.sendall(chunk)
        connection.shutdown(socket.SHUT_WR)
        answer = receive_all(connection)
    assert answer.startswith(b"HTTP/1.1 413 ") and b"over 16777216 bytes (--max-body-mb)" in answer


def test_caps_on_queries_topk_terms_and_response(sample_index: SearchIndex) -> None:
    # the request that took 47 s and 2.37 GB: 40,000 queries with topk 1e9
    with running_server(sample_index, max_queries=1000, max_response_mb=0.01) as server:
        began = time.perf_counter()
        big = {"queries": ["Who wrote Hamlet?"] * 40000, "topk": 10**9}
        status, error, _ = post(server.url, big)
        assert (status, error) == (413, {"error": "40000 queries, over 1000 per request "
                                                  "(--max-queries)"})  # fmt: skip
        status, error, _ = post(server.url, {"queries": ["a"], "topk": 10**9})
        assert (status, error) == (400, {"error": "'topk' is 1000000000, over 100 (--max-topk)"})
        assert time.perf_counter() - began < 5
        status, error, _ = post(server.url, {"queries": questions(100), "topk": 100})
        assert status == 413 and error["error"] == (
            "the answer would be over 10485 bytes (--max-response-mb); ask for fewer queries or "
            "a smaller topk"
        )
        words = " ".join(f"word{n}" for n in range(300))
        status, error, _ = post(server.url, {"queries": ["paris", words]})
        assert (status, error) == (400, {"error": "query 1 has 300 distinct terms, over 256 "
                                                  "(--max-query-terms)"})  # fmt: skip
        # under the caps, the same connection-less client is answered
        assert post(server.url, {"queries": ["Who wrote Hamlet?"]})[0] == 200


def test_a_huge_request_does_not_delay_a_small_one(sample_index: SearchIndex) -> None:
    with running_server(sample_index, max_queries=200000, request_timeout=300) as server:
        finished: dict[str, float] = {}

        def big() -> None:
            status, body, _ = post(server.url, {"queries": questions(60000)}, timeout=300)
            assert status == 200 and len(body["result"]) == 60000
            finished["big"] = time.perf_counter()

        thread = threading.Thread(target=big)
        thread.start()
        time.sleep(1.0)  # the big request is being searched
        latencies = []
        for question in ["Who wrote Hamlet?", "Who painted the Mona Lisa?", "Where is Vienna?"]:
            began = time.perf_counter()
            status, body, _ = post(server.url, {"queries": [question]})
            latencies.append(time.perf_counter() - began)
            assert status == 200 and body["result"][0]
        answered = time.perf_counter()
        thread.join()
    assert finished["big"] > answered, "the big request ended first: the test proves nothing"
    assert max(latencies) < 1.0, latencies


def test_the_deadline_drops_the_rest_of_a_request(sample_index: SearchIndex) -> None:
    with running_server(sample_index, max_queries=200000, request_timeout=0.3) as server:
        began = time.perf_counter()
        status, error, headers = post(server.url, {"queries": questions(60000)})
        assert time.perf_counter() - began < 5
        assert status == 503 and headers["Retry-After"] == "1"
        assert error == {"error": "the searches did not finish within 0.3 s (--request-timeout); "
                                  "the rest were dropped"}  # fmt: skip
        began = time.perf_counter()  # the dropped work does not hold the searchers
        assert post(server.url, {"queries": ["Who wrote Hamlet?"]})[0] == 200
        assert time.perf_counter() - began < 1.0
        assert server.health()["requests"]["refused"] == 1


# --- connections -------------------------------------------------------------------------------


def test_slow_drips_are_closed_and_do_not_block_others(sample_index: SearchIndex) -> None:
    with running_server(sample_index, read_timeout=0.5) as server:
        drips = [connect(server) for _ in range(100)]
        for drip in drips:
            drip.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
        began = time.perf_counter()
        assert post(server.url, {"queries": ["Who wrote Hamlet?"]})[0] == 200
        assert time.perf_counter() - began < 3.0  # milliseconds on an idle machine
        time.sleep(0.3)
        for drip in drips:
            drip.sendall(b"Content-")  # still dripping: the deadline runs from the first byte
        answers = [receive_all(drip) for drip in drips]
        elapsed = time.perf_counter() - began
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0]
        assert b"the request did not arrive within 0.5 s (--read-timeout)" in answers[0]
        assert 0.5 <= elapsed < 5
        for drip in drips:
            drip.close()
        time.sleep(0.1)
        assert server.health()["connections"] == 0
        # a connection that sends nothing is closed quietly after read_timeout; a keep-alive
        # connection is kept idle_timeout between requests
        with connect(server) as silent:
            assert receive_all(silent) == b""


def test_idle_keep_alive_connections_are_closed(sample_index: SearchIndex) -> None:
    with running_server(sample_index, idle_timeout=0.3) as server, connect(server) as client:
        body = json.dumps({"queries": ["paris"]}).encode()
        for _ in range(2):  # keep-alive: two requests on one connection
            client.sendall(raw_request(body))
            assert read_response(client).startswith(b"HTTP/1.1 200 ")
        began = time.perf_counter()
        assert receive_all(client) == b""  # then the idle connection is closed
        assert 0.25 <= time.perf_counter() - began < 2


def test_connection_cap_answers_503_with_retry_after(sample_index: SearchIndex) -> None:
    with running_server(sample_index, max_connections=5, read_timeout=5) as server:
        held = [connect(server) for _ in range(5)]
        time.sleep(0.2)
        status, error, headers = post(server.url, {"queries": ["paris"]})
        assert status == 503 and headers["Retry-After"] == "1"
        assert error == {"error": "over 5 connections; retry shortly"}
        for connection in held:
            connection.close()
        time.sleep(0.2)
        assert post(server.url, {"queries": ["paris"]})[0] == 200
        assert server.health()["requests"]["overloaded"] == 1


def test_request_cap_answers_503_with_retry_after(sample_index: SearchIndex) -> None:
    with running_server(sample_index, max_requests=1, max_queries=200000) as server:
        thread = threading.Thread(target=post, args=(server.url, {"queries": questions(30000)}))
        thread.start()
        time.sleep(1.0)
        status, error, headers = post(server.url, {"queries": ["paris"]})
        thread.join()
    assert status == 503 and headers["Retry-After"] == "1"
    assert error == {"error": "over 1 requests in progress; retry shortly"}


def test_protocol_errors(server: RetrievalServer) -> None:
    with connect(server) as client:
        client.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000)
        assert receive_all(client).startswith(b"HTTP/1.1 431 ")
    with connect(server) as client:
        client.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert receive_all(client).startswith(b"HTTP/1.1 400 ")
    with connect(server) as client:  # Expect: 100-continue is honoured
        body = json.dumps({"queries": ["paris"]}).encode()
        client.sendall(raw_request(b"", extra="Expect: 100-continue\r\n").replace(
            b"Content-Length: 0", b"Content-Length: %d" % len(body)))  # fmt: skip
        assert client.recv(65536).startswith(b"HTTP/1.1 100 ")
        client.sendall(body)
        assert read_response(client).startswith(b"HTTP/1.1 200 ")


def test_an_early_disconnect_logs_one_line_and_no_traceback(
    sample_index: SearchIndex, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="reward_plugins.search")
    with running_server(sample_index, max_queries=100000) as server:
        for _ in range(3):
            client = connect(server)
            body = json.dumps({"queries": questions(3000), "topk": 20}).encode()
            client.sendall(raw_request(body))
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # a reset, before the answer
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(caplog.records) < 3:
            time.sleep(0.1)
        assert post(server.url, {"queries": ["paris"]})[0] == 200
    records = [r for r in caplog.records if r.name.startswith("reward_plugins.search")]
    assert len(records) == 3, [r.getMessage() for r in records]
    for record in records:
        assert re.fullmatch(
            r"127\.0\.0\.1:\d+: the client went away \(\w+Error\)", record.getMessage()
        )
        assert record.exc_info is None
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err


# --- the cache ---------------------------------------------------------------------------------


def test_repeated_queries_come_from_the_cache(sample_index: SearchIndex) -> None:
    with running_server(sample_index) as server:
        group = {"queries": ["Who wrote Hamlet?"], "topk": 3, "return_scores": True}
        answers = [post(server.url, group)[1] for _ in range(5)]  # a GRPO group of 5
        assert all(answer == answers[0] for answer in answers)
        # the same analyzed terms in another spelling are the same search
        assert post(server.url, {**group, "queries": ["hamlet WROTE who"]})[1] == answers[0]
        cache = server.health()["cache"]
        assert (cache["misses"], cache["hits"], cache["entries"]) == (1, 5, 1)
        assert 0 < cache["bytes"] <= cache["limit_bytes"] == 256 * 2**20
    with running_server(sample_index, cache_mb=0) as server:
        post(server.url, group)
        assert server.health()["cache"]["entries"] == 0
    # a GRPO group sent at once: one search, the others wait for it
    with running_server(sample_index, max_queries=100000) as server:
        slow = {"queries": questions(20000), "topk": 3}
        threads = [threading.Thread(target=post, args=(server.url, slow)) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cache = server.health()["cache"]
        assert cache["entries"] == 20000 and cache["hits"] + cache["shared"] == 4 * 20000


def test_result_cache_evicts_least_recently_used() -> None:
    cache = _ResultCache(limit=1000)
    hit = [(b"x" * 100, 1.0)]
    for n in range(20):
        cache.put(((("t", n),), 3), hit)
        assert cache.size <= 1000
    assert cache.get(((("t", 0),), 3)) is None and cache.get(((("t", 19),), 3)) == hit
    cache.put(((("huge", 1),), 3), [(b"x" * 5000, 1.0)])  # bigger than the whole cache: not kept
    assert cache.get(((("huge", 1),), 3)) is None


# --- the Python API ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_topk": 0}, "max_topk: expected an int of at least 1, got 0 (int)"),
        ({"max_queries": 2.5}, "max_queries: expected an int of at least 1, got 2.5 (float)"),
        ({"request_timeout": float("nan")}, "request_timeout: expected a number of at least"),
        ({"read_timeout": float("inf")}, "read_timeout: expected a number of at least"),
        ({"cache_mb": -1}, "cache_mb: expected a number of at least 0, got -1 (int)"),
        ({"search_threads": True}, "search_threads: expected an int of at least 1, got True"),
        ({"max_body_mb": 10**400}, "max_body_mb: expected a number of at least"),
    ],
)
def test_limits_are_checked(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        Limits(**limits)


def test_running_server_checks_its_arguments(sample_index: SearchIndex, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown limit"), running_server(sample_index, x=1):
        pass
    with (
        pytest.raises(InvalidInput, match="topk: 200 is above max_topk"),
        running_server(sample_index, topk=200),
    ):
        pass
    with (
        running_server(sample_index) as first,
        pytest.raises(OSError),
        running_server(sample_index, port=first.port),
    ):
        pass
    build_index(sample_corpus_path(), tmp_path / "index", heap_mb=20, threads=1)
    with running_server(tmp_path / "index") as server:  # an index directory is opened
        assert post(server.url, {"queries": ["Who wrote Hamlet?"]})[0] == 200


def test_docstring_examples(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    failures, tried = doctest.testmod(server_module)
    assert tried > 0 and failures == 0


# --- the command line --------------------------------------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }


def serve_and_ask(arguments: list[str], env: dict[str, str], queries: list[str]) -> Any:
    """Start ``retriever serve ARGUMENTS --port 0``, ask ``queries``, SIGTERM it: its first
    stdout line, the answer, its exit status and stderr."""
    command = [sys.executable, "-m", "reward_plugins", "retriever", "serve", *arguments]
    process = subprocess.Popen(
        [*command, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=REPO,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/retrieve)\n$", line)
        assert match, (line, process.stderr.read() if process.stderr else "")
        answer = post(match[1], {"queries": queries})[:2]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert process.stderr is not None
    return line, answer, process.returncode, process.stderr.read()


def test_cli_serve_a_corpus_through_the_cache(tmp_path: Path, cli_env: dict[str, str]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"id": "a", "contents": "Abbey Road\nAn album by the Beatles."},
        {"id": "b", "contents": "Vienna\nThe Danube flows through it."},
    ]
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    arguments = ["--corpus", str(corpus), "--topk", "1"]
    queries = ["who recorded abbey road", "danube"]
    line, answer, code, stderr = serve_and_ask(arguments, cli_env, queries)
    assert line == f"serving 2 documents of {corpus} at {line.split(' at ')[1]}"
    assert answer == (200, {"result": [[rows[0]], [rows[1]]]})
    assert code == 0 and stderr == ""  # SIGTERM is how a server stops: exit 0, nothing said
    [entry] = (tmp_path / "cache" / "reward-plugins" / "indexes").iterdir()
    built = (entry / MANIFEST_NAME).stat().st_mtime_ns
    serve_and_ask(arguments, cli_env, queries)  # a restart opens the cached index
    assert (entry / MANIFEST_NAME).stat().st_mtime_ns == built


def test_cli_serve_an_index_and_the_sample(tmp_path: Path, cli_env: dict[str, str]) -> None:
    build_index(sample_corpus_path(), tmp_path / "index", heap_mb=20, threads=1)
    line, answer, code, _ = serve_and_ask(["--index", str(tmp_path / "index")], cli_env, ["hamlet"])
    assert line.startswith(f"serving 228 documents of {tmp_path / 'index'} at ")
    assert answer[0] == 200 and answer[1]["result"][0][0]["contents"].startswith("Hamlet\n")
    line, answer, code, _ = serve_and_ask([], cli_env, ["hamlet"])
    assert line.startswith(f"serving 228 documents of {sample_corpus_path()} at ") and code == 0
    # --common-df: "hamlet" is rare, "wrote" is in over 2% of the passages: same first answer
    arguments = ["--index", str(tmp_path / "index"), "--common-df", "0.02"]
    line, answer, code, _ = serve_and_ask(arguments, cli_env, ["who wrote hamlet"])
    assert answer[0] == 200 and answer[1]["result"][0][0]["contents"].startswith("Hamlet\n")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--corpus", "missing.jsonl"], "retriever serve: missing.jsonl: No such file"),
        (["--index", "missing"], "retriever serve: missing: not an index directory"),
        (["--index", "."], "retriever serve: .: no reward-plugins-index.json: not a complete"),
        (["--corpus", "bad.jsonl"], "retriever serve: bad.jsonl line 2: the 'contents' field must "
                                    "be a string, got number"),
        (["--topk", "0"], "retriever serve: --topk must be at least 1, got 0"),
        (["--topk", "101"], "retriever serve: --topk 101 is above --max-topk 100"),
        (["--port", "-1"], "retriever serve: --port must be between 0 and 65535, got -1"),
        (["--max-topk", "0"], "retriever serve: --max-topk: expected an int of at least 1, got 0"),
        (["--read-timeout", "nan"], "retriever serve: --read-timeout: expected a number of at"),
        (["--common-df", "0"], "retriever serve: --common-df: expected a share of the passages "
                               "above 0 and at most 1, got 0.0"),
        (["--common-df", "nan"], "retriever serve: --common-df: expected a share"),
        (["--index", "i", "--corpus", "c"], "retriever serve: argument --corpus: not allowed with"),
    ],
)  # fmt: skip
def test_cli_serve_errors_are_one_line(
    tmp_path: Path, cli_env: dict[str, str], arguments: list[str], message: str
) -> None:
    (tmp_path / "bad.jsonl").write_text(
        '{"id": "1", "contents": "A\\nb"}\n{"id": "2", "contents": 5}\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "reward_plugins", "retriever", "serve", *arguments],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, env=cli_env,
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"reward-plugins: error: {message}"), lines


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_out_of_file_descriptors_the_server_waits_instead_of_spinning(
    tmp_path: Path, cli_env: dict[str, str]
) -> None:
    import resource

    def few_descriptors() -> None:  # soft and hard: the server cannot lift it
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    build_index(sample_corpus_path(), tmp_path / "index", heap_mb=20, threads=1)
    command = [sys.executable, "-m", "reward_plugins", "retriever", "serve", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--index", str(tmp_path / "index"), "--read-timeout", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env,
        preexec_fn=few_descriptors,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        url = re.search(r"at (http://\S+)\n$", process.stdout.readline())[1]  # type: ignore[index]
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        flood = [socket.create_connection((host, int(port)), timeout=10) for _ in range(120)]
        time.sleep(0.5)
        before = cpu_seconds(process.pid)
        time.sleep(1.5)  # out of descriptors: accepting pauses, it does not spin
        assert cpu_seconds(process.pid) - before < 0.5
        for connection in flood:
            connection.close()
        time.sleep(2.5)  # the accepted ones time out, the backlog drains
        assert post(url, {"queries": ["Who wrote Hamlet?"]}, timeout=20)[0] == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert process.stderr is not None
    err = process.stderr.read()
    assert "Traceback" not in err and "socket.accept() out of system resource" in err
    lines = err.splitlines()
    assert all(line.startswith("reward-plugins: ") for line in lines), err[-2000:]
    assert len(lines) < 20, err[-2000:]  # at most one line a second per kind of failure
