"""The retriever at Wikipedia scale: build, memory, throughput, recall and hostile clients,
side by side for the tantivy index (exact, and ``tantivy-common``: the same index served with
``--common-df``), the bm25s in-memory index and pyserini (Lucene), in one run.

On the synthetic wiki-18 corpora of ``benchmarks/wiki18_synth.py`` (1M and 4M passages on every
run; the full 21,015,324 with ``--sizes 21015324``), per engine and size:

- **build**: wall seconds, peak RSS of the build (``wait4``'s ``ru_maxrss``; for bm25s, which
  builds in the server process, its ``VmHWM`` when it starts answering), index size on disk;
- **serving** (the server a subprocess, queried over HTTP in Search-R1's protocol, one query per
  request as verl's search tool sends them, ``topk`` 3 with scores): private RSS (``Private_Clean
  + Private_Dirty`` of ``/proc/PID/smaps_rollup``, summed over the server's processes; it counts
  the index pages only the server maps), anonymous RSS (its heap) and total RSS after a warm-up
  of 200 queries; queries/s and p50/p99 latency with 1 and 16 concurrent
  clients on distinct questions and on a GRPO step's stream (512 prompts x 5 samples x 3 turns,
  samples often repeating their prompt's query); recall@3 (the target passage among the 3);
  and the load generator's own ceiling (16 clients sending ``GET /health`` for 5 s);
- **hostile clients**: for ``--hostile-seconds``, one client sends small queries one after the
  other while others send (a) one request of 40,000 queries with ``topk`` 10^9, (b) 300
  connections that drip their request a byte a second, (c) a 17 MiB body; the worst small-query
  latency is what counts (a small query that fails counts as the client timeout).

pyserini's ``LuceneSearcher`` runs in its own virtual environment (``--pyserini-python``, Java
21+ through ``JAVA_HOME``/``--java-home``): its index is built with ``pyserini.index.lucene``
(``JsonCollection``, ``--storeRaw``) and it is queried in-process (``search`` in a loop for 1
client, ``batch_search`` with 16 threads for 16), not over HTTP; memory is the JVM process's.

Every figure is printed in one table with its ratio to the target (>= 1: met): build <= 30 min,
private RSS serving <= 1 GB, >= 100 q/s from 16 clients on distinct questions, >= 1,000 q/s on the
GRPO stream, p99 <= 500 ms, small queries within 1 s under hostile clients. ``--json PATH``
writes the figures. Corpora, queries and indexes live in ``--cache-dir``
(``~/.cache/reward-plugins-bench/``); ``--reuse`` serves an index already built there (its
build figures read back from its ``build.json``); ``--build-only`` builds tantivy indexes and
stops there; ``--report`` prints the table, in Markdown, of earlier ``--json`` files.

    PYTHONPATH=. python benchmarks/bench_retriever.py [--sizes 1000000,4000000]
        [--engines tantivy,tantivy-common,bm25s,pyserini] [--common-df 0.05]
        [--bm25s-max 1000000] [--json results.json]
    PYTHONPATH=. python benchmarks/bench_retriever.py --report results.json [more.json ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wiki18_synth

TOPK = 3
WARM_UP = 200
ONE_CLIENT_QUERIES = 300
HOSTILE_QUERIES = 40_000
HOSTILE_TOPK = 10**9
DRIPPING_CONNECTIONS = 300
BIG_BODY_BYTES = 17 * 2**20
CLIENT_TIMEOUT_S = 10.0
HOSTILE_GRACE_S = 15.0
ENGINES = ("tantivy", "tantivy-common", "bm25s", "pyserini")

# (figure, label, target, higher is better)
TARGETS: tuple[tuple[str, str, float | None, bool], ...] = (
    ("build_s", "build wall (s)", 1800.0, False),
    ("build_peak_rss_gb", "build peak RSS (GB)", None, False),
    ("index_disk_gb", "index on disk (GB)", None, False),
    ("private_rss_gb", "private RSS serving (GB)", 1.0, False),
    ("total_rss_gb", "total RSS serving (GB)", None, False),
    ("anonymous_rss_gb", "anonymous RSS serving (GB)", None, False),
    ("client_ceiling_qps", "client ceiling, GET /health (req/s)", None, True),
    ("qps_1_distinct", "q/s 1 client, distinct", None, True),
    ("p50_ms_1_distinct", "p50 ms 1 client, distinct", None, False),
    ("qps_16_distinct", "q/s 16 clients, distinct", 100.0, True),
    ("p50_ms_16_distinct", "p50 ms 16 clients, distinct", None, False),
    ("p99_ms_16_distinct", "p99 ms 16 clients, distinct", 500.0, False),
    ("qps_1_grpo", "q/s 1 client, GRPO", None, True),
    ("qps_16_grpo", "q/s 16 clients, GRPO", 1000.0, True),
    ("p99_ms_16_grpo", "p99 ms 16 clients, GRPO", 500.0, False),
    ("recall_at_3", "recall@3 (distinct)", None, True),
    ("recall_at_3_grpo", "recall@3 (GRPO)", None, True),
    ("hostile_worst_ms", "worst small query, hostile (ms)", 1000.0, False),
    ("hostile_private_rss_gb", "private RSS during hostile (GB)", None, False),
    ("hostile_anonymous_rss_gb", "anonymous RSS during hostile (GB)", None, False),
)
GB = 1e9


@dataclass
class Result:
    engine: str
    passages: int
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.engine} {self.passages / 1e6:.3g}M"


# --------------------------------------------------------------------------- processes


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def memory(pid: int) -> tuple[float, float, float]:
    """``(private, total, anonymous)`` RSS in bytes of ``pid`` and its descendants
    (``smaps_rollup``). Private counts the pages of the memory-mapped index that only this
    process maps (page cache, reclaimable); anonymous is the process's own heap and stacks."""
    private = total = anonymous = 0.0
    for process in _descendants(pid):
        try:
            text = Path(f"/proc/{process}/smaps_rollup").read_text()
        except OSError:
            continue
        fields = dict(re.findall(r"^(\w+):\s+(\d+) kB", text, re.MULTILINE))
        private += 1024.0 * (int(fields["Private_Clean"]) + int(fields["Private_Dirty"]))
        total += 1024.0 * int(fields["Rss"])
        anonymous += 1024.0 * int(fields["Anonymous"])
    return private, total, anonymous


def high_water(pid: int) -> float:
    """Peak RSS in bytes of ``pid`` (``VmHWM``)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return 1024.0 * int(re.search(r"^VmHWM:\s+(\d+) kB", text, re.MULTILINE)[1])  # type: ignore[index]


def timed_build(command: list[str], log: Path) -> tuple[float, float]:
    """``(wall seconds, peak RSS bytes)`` of running ``command`` to completion."""
    start = time.perf_counter()
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        tail = log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}): {tail}")
    return wall, usage.ru_maxrss * 1024.0


def disk_bytes(path: Path) -> float:
    return float(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()))


class Watchdog(threading.Thread):
    """Kills the server when it, or the machine, runs short of memory; records its peak."""

    def __init__(self, pid: int, limit_bytes: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit = pid, limit_bytes
        self.peak_private = self.peak_anonymous = 0.0
        self.killed: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            private, total, anonymous = memory(self.pid)
            self.peak_private = max(self.peak_private, private)
            self.peak_anonymous = max(self.peak_anonymous, anonymous)
            available = _available_memory()
            if total > self.limit or available < 2 * GB:
                self.killed = f"killed at {total / GB:.1f} GB RSS, {available / GB:.1f} GB free"
                for process in _descendants(self.pid):
                    with suppress(ProcessLookupError, PermissionError):
                        os.kill(process, signal.SIGKILL)
                return


def _available_memory() -> float:
    text = Path("/proc/meminfo").read_text()
    return 1024.0 * int(re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)[1])  # type: ignore[index]


@contextmanager
def server(
    command: list[str], log: Path, start_timeout: float, path: str = "/retrieve"
) -> Iterator[tuple[str, int]]:
    """``(URL, pid)`` of ``command``, a server that prints its URL when it is ready: the base
    URL it prints plus ``path``."""
    with log.open("wb") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors)
    assert process.stdout is not None
    url: list[str] = []

    def read_url() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(rb"(http://[^/\s]+)\S*\s*$", line.strip())
            if match and not url:
                url.append(match[1].decode() + path)

    reader = threading.Thread(target=read_url, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + start_timeout
        while not url:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the server did not start: {' '.join(command)}: {tail}")
            time.sleep(0.1)
        yield url[0], process.pid
    finally:
        for pid in reversed(_descendants(process.pid)):
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            for pid in _descendants(process.pid):
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            process.wait()


# --------------------------------------------------------------------------- load


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _load(
    url: str, rows: list[dict[str, Any]], clients: int, max_seconds: float
) -> dict[str, float]:
    """Send ``rows``' queries, one per request, from ``clients`` concurrent clients pulling in
    order, for at most ``max_seconds``; queries/s, p50/p99/max latency (ms), recall@3 and
    failures (an error status, a connection error or no answer within the client timeout)."""
    position = 0
    latencies: list[float] = []
    hits = failures = 0
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        deadline = start + max_seconds

        async def client() -> None:
            nonlocal position, hits, failures
            while position < len(rows) and time.perf_counter() < deadline:
                row = rows[position]
                position += 1
                body = {"queries": [row["query"]], "topk": TOPK, "return_scores": True}
                sent = time.perf_counter()
                try:
                    async with session.post(url, json=body) as response:
                        payload = await response.json()
                        ok = response.status == 200
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                    ok = False
                latencies.append(time.perf_counter() - sent)
                if not ok:
                    failures += 1
                    continue
                ids = [hit["document"]["id"] for hit in payload["result"][0]]
                hits += row["target"] in ids[:TOPK]

        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - start
    sent_count = len(latencies)
    return {
        "qps": sent_count / wall,
        "p50_ms": 1000 * _percentile(latencies, 0.5),
        "p99_ms": 1000 * _percentile(latencies, 0.99),
        "max_ms": 1000 * max(latencies, default=float("nan")),
        "recall": hits / max(1, sent_count - failures),
        "failures": failures,
        "sent": sent_count,
    }


async def _ceiling(url: str, clients: int, seconds: float) -> float:
    """Requests/s of ``clients`` clients sending ``GET /health`` (any answer): what this load
    generator can send at all, the ceiling of every q/s figure."""
    health = url.rsplit("/", 1)[0] + "/health"
    count = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as session:
        deadline = time.perf_counter() + seconds

        async def client() -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                async with session.get(health) as response:
                    await response.read()
                count += 1

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return count / (time.perf_counter() - start)


async def _dripping(host: str, port: int, until: float) -> int:
    """How many of ``DRIPPING_CONNECTIONS`` connections, each sending its request a byte a
    second until ``until``, the server closed or answered (refused) before then."""

    async def one() -> bool:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            return True
        request = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nX-Pad: "
        try:
            for byte in request + b"a" * 100_000:
                if time.perf_counter() >= until:
                    return False
                writer.write(bytes([byte]))
                await writer.drain()
                try:
                    await asyncio.wait_for(reader.read(1), timeout=1.0)
                    return True  # an answer (a refusal) or the end of the connection
                except asyncio.TimeoutError:
                    continue
        except OSError:
            return True
        finally:
            writer.close()
        return False

    return sum(await asyncio.gather(*(one() for _ in range(DRIPPING_CONNECTIONS))))


async def _post_once(url: str, body: bytes) -> str:
    """What posting ``body`` got (a status or an error) and how long it took."""
    start = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            headers = {"Content-Type": "application/json"}
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                outcome = f"HTTP {response.status}"
    except (aiohttp.ClientError, asyncio.TimeoutError) as error:
        outcome = type(error).__name__
    return f"{outcome} after {time.perf_counter() - start:.1f} s"


async def _hostile(url: str, rows: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    until = time.perf_counter() + seconds
    queries = [row["query"] for row in rows]
    many = {
        "queries": (queries * (HOSTILE_QUERIES // len(queries) + 1))[:HOSTILE_QUERIES],
        "topk": HOSTILE_TOPK,
        "return_scores": True,
    }
    big = b'{"queries": ["' + b"a " * (BIG_BODY_BYTES // 2) + b'"], "topk": 3}'
    tasks = [
        asyncio.create_task(_post_once(url, json.dumps(many).encode())),
        asyncio.create_task(_dripping(host, int(port), until)),
        asyncio.create_task(_post_once(url, big)),
    ]
    await asyncio.sleep(0.5)  # the hostile requests are on their way
    small = await _load(url, rows * 10, 1, until - time.perf_counter())  # cycled if need be
    await asyncio.wait(tasks, timeout=HOSTILE_GRACE_S)
    pending = f"no answer {HOSTILE_GRACE_S:g} s after the window"
    many_outcome, closed, big_outcome = (
        task.result() if task.done() else task.cancel() and pending for task in tasks
    )
    return {"small": small, "many": many_outcome, "closed": closed, "big": big_outcome}


def hostile_phase(
    url: str, pid: int, rows: list[dict[str, Any]], seconds: float, limit: float
) -> tuple[dict[str, float], list[str]]:
    """Figures and notes of small queries under hostile clients (see the module docstring)."""
    watchdog = Watchdog(pid, limit)
    watchdog.start()
    try:
        outcome = asyncio.run(_hostile(url, rows, seconds))
    finally:
        watchdog.stop.set()
        watchdog.join()
    small = outcome["small"]
    worst = 1000 * CLIENT_TIMEOUT_S if small["failures"] else small["max_ms"]
    notes = [
        f"hostile: {small['sent']} small queries, {small['failures']} failed, p50"
        f" {small['p50_ms']:.0f} ms; 40,000 queries x topk 1e9: {outcome['many']}; 17 MiB body:"
        f" {outcome['big']}; of {DRIPPING_CONNECTIONS} dripping connections the server ended"
        f" {outcome['closed']} within {seconds:g} s"
    ]
    if watchdog.killed:
        notes.append(f"hostile: the watchdog {watchdog.killed}")
    figures = {
        "hostile_worst_ms": worst,
        "hostile_private_rss_gb": watchdog.peak_private / GB,
        "hostile_anonymous_rss_gb": watchdog.peak_anonymous / GB,
    }
    return figures, notes


# --------------------------------------------------------------------------- engines


@dataclass
class Workload:
    """The queries of one corpus size, in disjoint slices so no phase meets a cached answer."""

    warm_up: list[dict[str, Any]]
    one_client: list[dict[str, Any]]
    sixteen_clients: list[dict[str, Any]]
    hostile: list[dict[str, Any]]
    grpo: list[dict[str, Any]]  # one step, 512 prompts: the 16-client stream
    grpo_small: list[dict[str, Any]]  # another step, fewer prompts: the 1-client stream

    @classmethod
    def of(cls, passages: int, distinct: int, cache_dir: Path) -> Workload:
        hostile = 1000
        rows = wiki18_synth.distinct_queries(
            passages, WARM_UP + ONE_CLIENT_QUERIES + distinct + hostile, cache_dir=cache_dir
        )
        a, b = WARM_UP, WARM_UP + ONE_CLIENT_QUERIES
        return cls(
            warm_up=rows[:a],
            one_client=rows[a:b],
            sixteen_clients=rows[b:-hostile],
            hostile=rows[-hostile:],
            grpo=wiki18_synth.grpo_stream(passages, 512, step=0, cache_dir=cache_dir),
            grpo_small=wiki18_synth.grpo_stream(passages, 100, step=1, cache_dir=cache_dir),
        )


def _module_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "reward_plugins", "retriever", *arguments]


def serve_and_measure(
    result: Result, command: list[str], work: Workload, args: argparse.Namespace, log: Path
) -> None:
    """Start the server, then every serving figure of the module docstring into ``result``."""
    figures = result.figures
    started = time.perf_counter()
    with server(command, log, args.start_timeout) as (url, pid):
        if result.engine == "bm25s":  # it builds in the server process
            figures["build_s"] = time.perf_counter() - started
            figures["build_peak_rss_gb"] = high_water(pid) / GB
        asyncio.run(_load(url, work.warm_up, 16, 600))
        private, total, anonymous = memory(pid)
        figures["private_rss_gb"], figures["total_rss_gb"] = private / GB, total / GB
        figures["anonymous_rss_gb"] = anonymous / GB
        figures["client_ceiling_qps"] = asyncio.run(_ceiling(url, 16, 5.0))
        for name, rows, clients in (
            ("1_distinct", work.one_client, 1),
            ("16_distinct", work.sixteen_clients, 16),
            ("1_grpo", work.grpo_small, 1),
            ("16_grpo", work.grpo, 16),
        ):
            run = asyncio.run(_load(url, rows, clients, args.max_seconds))
            figures[f"qps_{name}"] = run["qps"]
            figures[f"p50_ms_{name}"], figures[f"p99_ms_{name}"] = run["p50_ms"], run["p99_ms"]
            if name == "16_distinct":
                figures["recall_at_3"] = run["recall"]
            if name == "16_grpo":
                figures["recall_at_3_grpo"] = run["recall"]
            if run["failures"] or run["sent"] < len(rows):
                result.notes.append(
                    f"{name}: {run['sent']} of {len(rows)} queries sent in the time allowed,"
                    f" {run['failures']} failed"
                )
        if not args.no_hostile:
            hostile, notes = hostile_phase(
                url, pid, work.hostile, args.hostile_seconds, args.rss_limit_gb * GB
            )
            figures.update(hostile)
            result.notes.extend(notes)


def build_figures(index_dir: Path, command: list[str], reuse: bool) -> dict[str, float]:
    """Build figures of the index in ``index_dir``: measured by running ``command``, or read
    back from ``build.json`` with ``reuse`` when a build completed there before."""
    record = index_dir.with_name(index_dir.name + ".build.json")
    if reuse and record.exists():
        return dict(json.loads(record.read_text()))
    shutil.rmtree(index_dir, ignore_errors=True)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    wall, peak = timed_build(command, index_dir.with_name(index_dir.name + ".build.log"))
    figures = {
        "build_s": wall,
        "build_peak_rss_gb": peak / GB,
        "index_disk_gb": disk_bytes(index_dir) / GB,
    }
    record.write_text(json.dumps(figures))
    return figures


def measure_tantivy(
    passages: int, work: Workload | None, args: argparse.Namespace, common_df: float | None = None
) -> Result:
    engine = "tantivy" if common_df is None else f"tantivy common-df {common_df:g}"
    result = Result(engine, passages)
    corpus = wiki18_synth.ensure_corpus(passages, cache_dir=args.cache_dir)
    index_dir = args.cache_dir / f"index-tantivy-{corpus.stem}"
    build = _module_command("index", str(corpus), "-o", str(index_dir), "-q")
    result.figures.update(build_figures(index_dir, build, args.reuse or common_df is not None))
    if work is None:  # --build-only
        return result
    serve = _module_command("serve", "--index", str(index_dir), "--host", "127.0.0.1")
    if common_df is not None:
        serve += ["--common-df", str(common_df)]
    log = args.cache_dir / f"serve-{engine.replace(' ', '-')}-{passages}.log"
    serve_and_measure(result, [*serve, "--port", "0"], work, args, log)
    return result


def measure_tantivy_common(
    passages: int, work: Workload | None, args: argparse.Namespace
) -> Result:
    """The same index (built by the ``tantivy`` engine first) served with ``--common-df``."""
    return measure_tantivy(passages, work, args, args.common_df)


# The baseline: the in-memory bm25s index and threaded server that ``reward_plugins/retriever.py``
# was until the on-disk index replaced it, loaded from that commit of this repository.
BM25S_COMMIT = "48c8a71"
BM25S_SERVER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bm25s_retriever", sys.argv[1])
retriever = importlib.util.module_from_spec(spec)
spec.loader.exec_module(retriever)
server = retriever.make_server(retriever.BM25Index.from_jsonl(sys.argv[2]), "127.0.0.1", 0, 3)
print("serving at", server.url, flush=True)
server.serve_forever()
"""


def bm25s_module(cache_dir: Path) -> Path:
    """``reward_plugins/retriever.py`` at ``BM25S_COMMIT``, written into ``cache_dir``."""
    path = cache_dir / f"bm25s_retriever_{BM25S_COMMIT}.py"
    if not path.exists():
        repository = Path(__file__).resolve().parent.parent
        command = [
            "git",
            "-C",
            str(repository),
            "show",
            f"{BM25S_COMMIT}:reward_plugins/retriever.py",
        ]
        path.write_bytes(subprocess.run(command, capture_output=True, check=True).stdout)
    return path


def measure_bm25s(passages: int, work: Workload, args: argparse.Namespace) -> Result:
    result = Result("bm25s", passages)
    corpus = wiki18_synth.ensure_corpus(passages, cache_dir=args.cache_dir)
    log = args.cache_dir / f"serve-bm25s-{passages}.log"
    command = [sys.executable, "-c", BM25S_SERVER, str(bm25s_module(args.cache_dir)), str(corpus)]
    serve_and_measure(result, command, work, args, log)
    result.notes.append(
        f"bm25s: reward_plugins/retriever.py at {BM25S_COMMIT}, in memory, built at every start"
    )
    return result


# pyserini's lucene package imports its impact and dense searchers, which need torch; the BM25
# LuceneSearcher does not, so it is loaded with the package's three Java classes set by hand.
PYSERINI_WORKER = """
import importlib.util, json, re, sys, time, types
from pyserini.pyclass import autoclass
spec = importlib.util.find_spec("pyserini.search.lucene")
package = types.ModuleType("pyserini.search.lucene")
package.__path__ = list(spec.submodule_search_locations)
package.JQuery = autoclass("org.apache.lucene.search.Query")
package.JScoredDoc = autoclass("io.anserini.search.ScoredDoc")
package.JQueryGenerator = autoclass("io.anserini.search.query.QueryGenerator")
sys.modules["pyserini.search.lucene"] = package
from pyserini.search.lucene._searcher import LuceneSearcher

index, queries_path, topk = sys.argv[1], sys.argv[2], int(sys.argv[3])
work = json.load(open(queries_path))
searcher = LuceneSearcher(index)

def one(rows):
    hits, latencies, start = 0, [], time.perf_counter()
    for row in rows:
        sent = time.perf_counter()
        found = searcher.search(row["query"], k=topk)
        [searcher.doc(hit.docid).raw() for hit in found]
        latencies.append(time.perf_counter() - sent)
        hits += row["target"] in [hit.docid for hit in found]
    return len(rows) / (time.perf_counter() - start), hits / len(rows), latencies

def batch(rows, threads):
    start = time.perf_counter()
    found = searcher.batch_search(
        [r["query"] for r in rows], [str(i) for i in range(len(rows))], k=topk, threads=threads
    )
    for hits in found.values():
        [searcher.doc(hit.docid).raw() for hit in hits]
    rate = len(rows) / (time.perf_counter() - start)
    hits = sum(r["target"] in [h.docid for h in found[str(i)]] for i, r in enumerate(rows))
    return rate, hits / len(rows)

one(work["warm_up"])
text = open("/proc/self/smaps_rollup").read()
fields = dict(re.findall(r"^(\\w+):\\s+(\\d+) kB", text, re.MULTILINE))
out = {
    "private_rss_gb": 1024 * (int(fields["Private_Clean"]) + int(fields["Private_Dirty"])) / 1e9,
    "total_rss_gb": 1024 * int(fields["Rss"]) / 1e9,
    "anonymous_rss_gb": 1024 * int(fields["Anonymous"]) / 1e9,
}
out["qps_1_distinct"], _, latencies = one(work["one_client"])
out["p50_ms_1_distinct"] = 1000 * sorted(latencies)[len(latencies) // 2]
out["qps_16_distinct"], out["recall_at_3"] = batch(work["sixteen_clients"], 16)
out["qps_1_grpo"], _, _ = one(work["grpo_small"])
out["qps_16_grpo"], out["recall_at_3_grpo"] = batch(work["grpo"], 16)
print(json.dumps(out))
"""


def measure_pyserini(passages: int, work: Workload, args: argparse.Namespace) -> Result:
    result = Result("pyserini", passages)
    corpus = wiki18_synth.ensure_corpus(passages, cache_dir=args.cache_dir)
    environment = {**os.environ, "JAVA_HOME": str(args.java_home)}
    inputs = args.cache_dir / f"lucene-input-{corpus.stem}"
    inputs.mkdir(exist_ok=True)
    link = inputs / "docs.jsonl"
    if not link.exists():
        link.symlink_to(corpus)
    index_dir = args.cache_dir / f"index-lucene-{corpus.stem}"
    build = [
        str(args.pyserini_python), "-m", "pyserini.index.lucene", "--collection",
        "JsonCollection", "--input", str(inputs), "--index", str(index_dir), "--generator",
        "DefaultLuceneDocumentGenerator", "--threads", str(os.cpu_count() or 1), "--storeRaw",
    ]  # fmt: skip
    os.environ["JAVA_HOME"] = str(args.java_home)  # the build's child inherits it
    result.figures.update(build_figures(index_dir, build, args.reuse))
    queries = args.cache_dir / f"lucene-queries-{passages}.json"
    queries.write_text(json.dumps(work.__dict__))
    worker = [str(args.pyserini_python), "-c", PYSERINI_WORKER, str(index_dir), str(queries)]
    done = subprocess.run(
        [*worker, str(TOPK)], capture_output=True, text=True, env=environment, timeout=3600
    )
    if done.returncode:
        raise RuntimeError(f"pyserini's searcher failed: {done.stderr[-2000:]}")
    result.figures.update(json.loads(done.stdout.strip().splitlines()[-1]))
    result.notes.append(
        "pyserini: in-process (no HTTP): 1 client = search() in a loop, 16 clients ="
        " batch_search(threads=16); the JVM's memory; no hostile clients"
    )
    return result


MEASURES = {
    "tantivy": measure_tantivy,
    "tantivy-common": measure_tantivy_common,
    "bm25s": measure_bm25s,
    "pyserini": measure_pyserini,
}


# --------------------------------------------------------------------------- report


def _cell(value: float | None, target: float | None, higher: bool) -> str:
    if value is None:
        return "-"
    shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    if target is None:
        return shown
    ratio = value / target if higher else (target / value if value else float("inf"))
    return f"{shown} ({ratio:.2g}x {'ok' if ratio >= 1 else 'MISS'})"


def table(results: list[Result], markdown: bool = False) -> str:
    """The side-by-side table: a row per figure, a column per engine and size."""
    header = ["figure", "target", *(r.name for r in results)]
    rows = [header]
    for key, label, target, higher in TARGETS:
        shown_target = "-" if target is None else f"{'>=' if higher else '<='} {target:g}"
        cells = [_cell(r.figures.get(key), target, higher) for r in results]
        rows.append([label, shown_target, *cells])
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(header))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def report(paths: list[Path]) -> None:
    """The table (Markdown) and notes of results written by earlier runs' ``--json``."""
    results = [Result(**row) for path in paths for row in json.loads(path.read_text())]
    print(table(results, markdown=True))
    for result in results:
        for note in result.notes:
            print(f"- {result.name}: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="1000000,4000000",
        help="corpus sizes in passages, comma-separated (1000000,4000000; wiki-18: 21015324)",
    )
    parser.add_argument("--engines", default=",".join(ENGINES), help="(all four)")
    parser.add_argument(
        "--common-df", type=float, default=0.05, help="tantivy-common's --common-df (0.05)"
    )
    parser.add_argument(
        "--bm25s-max", type=int, default=1_000_000, help="largest size for bm25s (1000000)"
    )
    parser.add_argument(
        "--pyserini-max", type=int, default=4_000_000, help="largest size for pyserini (4000000)"
    )
    parser.add_argument("--distinct", type=int, default=2000, help="16-client questions (2000)")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="per load phase (120)")
    parser.add_argument("--hostile-seconds", type=float, default=20.0, help="(20)")
    parser.add_argument("--no-hostile", action="store_true", help="skip the hostile phase")
    parser.add_argument(
        "--rss-limit-gb", type=float, default=8.0, help="kill a server past this RSS (8)"
    )
    parser.add_argument("--start-timeout", type=float, default=3600.0, help="server start (3600 s)")
    parser.add_argument("--cache-dir", type=Path, default=wiki18_synth.DEFAULT_CACHE)
    parser.add_argument("--reuse", action="store_true", help="serve indexes already built")
    parser.add_argument(
        "--build-only", action="store_true", help="tantivy: build the indexes, serve nothing"
    )
    parser.add_argument("--pyserini-python", type=Path, default=Path("/work/bench-venv/bin/python"))
    parser.add_argument(
        "--java-home",
        type=Path,
        default=Path(os.environ.get("JAVA_HOME", "/usr/lib/jvm/default-java")),
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--report", type=Path, nargs="+", metavar="JSON", help="print earlier --json results"
    )
    args = parser.parse_args()
    if args.report:
        report(args.report)
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    engines = args.engines.split(",")
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"--engines: unknown {sorted(unknown)}; known: {', '.join(ENGINES)}")
    if args.build_only:
        engines = [engine for engine in engines if engine == "tantivy"]
    results: list[Result] = []
    for passages in sizes:
        work = None if args.build_only else Workload.of(passages, args.distinct, args.cache_dir)
        for engine in engines:
            if (engine == "bm25s" and passages > args.bm25s_max) or (
                engine == "pyserini" and passages > args.pyserini_max
            ):
                continue
            load = os.getloadavg()[0]
            print(f"{engine} at {passages:,} passages (load average {load:.1f})", flush=True)
            try:
                result = MEASURES[engine](passages, work, args)
            except (RuntimeError, OSError, subprocess.SubprocessError) as error:
                result = Result(engine, passages, notes=[f"{engine}: failed: {error}"])
            result.notes.append(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
            results.append(result)
            print(table([result]), *result.notes, sep="\n", flush=True)
            if args.json:
                args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    print()
    print(table(results))
    for result in results:
        for note in result.notes:
            print(f"{result.name}: {note}")


if __name__ == "__main__":
    main()
