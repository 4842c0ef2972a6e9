"""Queries per second of the BM25 retriever: the index alone, over HTTP, and through the tool.

On the shipped sample corpus (``reward_plugins/data/corpus/sample_corpus.jsonl``), with queries
made from its titles ("What is known about {title}?", 228 distinct queries, cycled), for batches
of 1 and 16 queries per call:

- ``index``: ``BM25Index.search(batch, topk)`` in a loop, no HTTP;
- ``http``: one client, one keep-alive connection (``http.client``), ``POST /retrieve`` with
  ``return_scores: true``, answers decoded, against ``reward-plugins retriever serve`` started
  in a subprocess (``--server thread``: in a thread of this process, sharing its GIL);
- ``tool``: ``SearchTool.execute`` (aiohttp, a session per call, as in training), ``--clients``
  concurrent calls (default 16 = the tool's default ``max_concurrency``), ``query_list`` batches.

Printed per row: wall seconds, calls and queries per second (the best of ``--repeats`` passes),
and the ratio to the index alone. Numbers depend on the machine; the server is single-process
(``ThreadingHTTPServer``, searches serialized by a lock), so more clients only hide latency.

    PYTHONPATH=. python benchmarks/bench_retriever.py [--seconds 2] [--repeats 3] [--clients 16]
        [--server process|thread]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.client
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from reward_plugins.retriever import BM25Index, make_server, read_corpus, sample_corpus_path

TOPK = 3


def queries() -> list[str]:
    titles = [d["contents"].split("\n")[0] for d in read_corpus(sample_corpus_path())]
    return [f"What is known about {title}?" for title in titles]


def batches(questions: list[str], size: int) -> Callable[[], list[str]]:
    """A function returning the next ``size`` questions, cycling."""
    position = 0

    def following() -> list[str]:
        nonlocal position
        batch = [questions[(position + i) % len(questions)] for i in range(size)]
        position += size
        return batch

    return following


def timed(step: Callable[[], Any], seconds: float) -> tuple[int, float]:
    """``(calls, wall seconds)`` of calling ``step`` for about ``seconds``."""
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        calls += 1
    return calls, time.perf_counter() - start


def bench_index(index: BM25Index, next_batch: Callable[[], list[str]], seconds: float) -> float:
    calls, wall = timed(lambda: index.search(next_batch(), TOPK), seconds)
    return calls / wall


def bench_http(url: str, next_batch: Callable[[], list[str]], seconds: float) -> float:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    connection = http.client.HTTPConnection(host, int(port))

    def step() -> None:
        body = json.dumps({"queries": next_batch(), "topk": TOPK, "return_scores": True})
        connection.request("POST", "/retrieve", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = json.loads(response.read())
        assert response.status == 200 and payload["result"], payload

    try:
        calls, wall = timed(step, seconds)
    finally:
        connection.close()
    return calls / wall


def bench_tool(
    url: str, next_batch: Callable[[], list[str]], seconds: float, clients: int
) -> float:
    from reward_plugins.tools import SearchTool

    tool = SearchTool({"retrieval_service_url": url, "max_concurrency": clients}, None)

    async def client(deadline: float) -> int:
        calls = 0
        while time.perf_counter() < deadline:
            response, _, metrics = await tool.execute("bench", {"query_list": next_batch()})
            assert metrics["error"] is None, response.text
            calls += 1
        return calls

    async def run() -> tuple[int, float]:
        start = time.perf_counter()
        counts = await asyncio.gather(*(client(start + seconds) for _ in range(clients)))
        return sum(counts), time.perf_counter() - start

    calls, wall = asyncio.run(run())
    return calls / wall


@contextmanager
def running_server(index: BM25Index, kind: str) -> Iterator[str]:
    """The ``/retrieve`` URL of a server of the sample corpus, in a subprocess or a thread."""
    if kind == "thread":
        server = make_server(index, "127.0.0.1", 0, TOPK)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield server.url
        finally:
            server.shutdown()
            server.server_close()
        return
    command = [sys.executable, "-m", "reward_plugins", "retriever", "serve", "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        match = re.search(r"(http://\S+/retrieve)", line)
        if not match:
            raise RuntimeError(f"the server did not start: {process.stderr.read()}")
        yield match[1]
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per pass (2)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per row, best kept (3)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent tool calls (16)")
    parser.add_argument("--server", choices=("process", "thread"), default="process")
    args = parser.parse_args()

    build = time.perf_counter()
    index = BM25Index.from_jsonl(sample_corpus_path())
    print(f"index of {len(index)} documents built in {time.perf_counter() - build:.3f} s")
    questions = queries()
    print(f"server in a {args.server}")
    print(f"{'path':28}  {'batch':>5}  {'calls/s':>9}  {'queries/s':>9}  vs index")
    with running_server(index, args.server) as url:
        for size in (1, 16):
            next_batch = batches(questions, size)
            rows: list[tuple[str, Callable[[], float]]] = [
                ("index", functools.partial(bench_index, index, next_batch, args.seconds)),
                (
                    "http (1 client, keep-alive)",
                    functools.partial(bench_http, url, next_batch, args.seconds),
                ),
                (
                    f"tool ({args.clients} clients)",
                    functools.partial(bench_tool, url, next_batch, args.seconds, args.clients),
                ),
            ]
            baseline = 0.0
            for name, bench in rows:
                rate = max(bench() for _ in range(args.repeats))
                baseline = baseline or rate
                print(
                    f"{name:28}  {size:5d}  {rate:9.1f}  {rate * size:9.1f}  "
                    f"{rate / baseline:6.2f}x"
                )


if __name__ == "__main__":
    main()
