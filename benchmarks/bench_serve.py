"""Rewards over HTTP against in-process scoring: rows/s, latency and server memory for one GRPO
step's batch (512 prompts x 5 samples = 2,560 rows), per protocol, with 1 and 2 workers, and on
Ray Serve.

The rows are the ``wide`` Search-R1 corpus of ``benchmarks/rollouts.py`` (1 to 5 golds, 5%
degenerate golds, 1-6 KB responses, mixed ground-truth shapes), scored by ``compute_score``.
Every server is a ``reward-plugins serve-rewards`` subprocess (``--ray``: a Ray Serve
deployment on a local Ray), queried on loopback the way each client sends a batch:

- ``in-process``: ``reward_plugins.router.route`` in a loop, the baseline;
- ``native, 1 request``: one ``POST /score`` of all rows;
- ``native, verl client``: 2,560 concurrent ``compute_score_remote`` calls in one event loop,
  as verl's reward loop awaits them (the client batches them);
- ``openrlhf, 1 request``: OpenRLHF 0.11.2's own ``_fetch_rewards_via_http`` given every row
  (one request per server); ``openrlhf, per rollout``: the same function with one row per call,
  64 calls in flight, as its single-turn executor calls it when each rollout ends;
- ``nemo-gym``: one ``POST /verify`` per row, 64 in flight (NeMo-Gym verifies each rollout).

Latency is per row: from its call to its answer. Per phase, in the benchmark's own process:
parsing and checking one native body of every row, scoring it through a pool of 1 and 2
workers, and shaping the answer. Each scenario runs ``--repeats`` times after a
warm-up; rows/s is the median run, p50/p99 over every row of every run. ``peak MB`` is the
server's private RSS (``Private_Clean + Private_Dirty``, summed over the server and its worker
processes), sampled every 50 ms.

    PYTHONPATH=. python benchmarks/bench_serve.py [--repeats 3] [--no-ray] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_retriever import memory, server
from rollouts import make_wide_rollouts

PROMPTS, SAMPLES = 512, 5
IN_FLIGHT = 64
"""Requests in flight for the protocols whose clients send one row per request."""
SCORER = "compute_score"
START_TIMEOUT_S = 120.0

Row = tuple[str, str, Any]


def jsonable(value: Any) -> Any:
    """A ground truth as JSON carries it (numpy arrays as lists), for every scenario alike."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    return value


def make_rows(seed: int) -> list[Row]:
    rows = make_wide_rollouts(PROMPTS, seed, group_size=SAMPLES)
    return [(source, response, jsonable(truth)) for source, response, truth in rows]


def chat_prompt(index: int) -> str:
    """A ChatML prompt as OpenRLHF renders one (the question itself does not matter here)."""
    return (
        "<|im_start|>system\nAnswer the question.<|im_end|>\n<|im_start|>user\n"
        f"Question {index}?<|im_end|>\n<|im_start|>assistant\n"
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --------------------------------------------------------------------------- scenarios

Scenario = Callable[[str, list[Row]], Awaitable[list[float]]]
"""``await scenario(base_url, rows)``: every row scored once; each row's latency in seconds."""


async def native_one_request(base: str, rows: list[Row]) -> list[float]:
    body = {"rows": [{"data_source": s, "solution_str": r, "ground_truth": t} for s, r, t in rows]}
    async with aiohttp.ClientSession() as session:
        began = time.perf_counter()
        async with session.post(base + "/score", json=body) as answer:
            answer.raise_for_status()
            results = (await answer.json())["results"]
        took = time.perf_counter() - began
    assert len(results) == len(rows)
    return [took] * len(rows)


async def native_verl_client(base: str, rows: list[Row]) -> list[float]:
    from reward_plugins.serve.client import compute_score_remote

    async def one(row: Row) -> float:
        began = time.perf_counter()
        result = await compute_score_remote(row[0], row[1], row[2], url=base)
        assert "score" in result
        return time.perf_counter() - began

    return list(await asyncio.gather(*(one(row) for row in rows)))


def _openrlhf_executor(base: str) -> Any:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    return SingleTurnAgentExecutor(remote_rm_url=[base + "/get_reward"])


def _openrlhf_inputs(rows: list[Row]) -> tuple[list[str], list[str], list[str]]:
    prompts = [chat_prompt(i // SAMPLES) for i in range(len(rows))]
    queries = [p + r + "<|im_end|>" for p, (_, r, _) in zip(prompts, rows, strict=True)]
    labels = [json.dumps({"data_source": s, "ground_truth": t}) for s, _, t in rows]
    return queries, prompts, labels


async def openrlhf_one_request(base: str, rows: list[Row]) -> list[float]:
    executor = _openrlhf_executor(base)
    queries, prompts, labels = _openrlhf_inputs(rows)
    began = time.perf_counter()
    answers = await executor._fetch_rewards_via_http(queries, prompts, labels)
    took = time.perf_counter() - began
    assert sum(len(answer["rewards"]) for answer in answers) == len(rows)
    return [took] * len(rows)


async def openrlhf_per_rollout(base: str, rows: list[Row]) -> list[float]:
    executor = _openrlhf_executor(base)
    queries, prompts, labels = _openrlhf_inputs(rows)
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(i: int) -> float:
        async with gate:
            began = time.perf_counter()
            answers = await executor._fetch_rewards_via_http(
                [queries[i]], [prompts[i]], [labels[i]]
            )
            assert len(answers[0]["rewards"]) == 1
            return time.perf_counter() - began

    return list(await asyncio.gather(*(one(i) for i in range(len(rows)))))


def nemo_gym_request(row: Row, index: int) -> dict[str, Any]:
    """A ``/verify`` request as NeMo-Gym sends one (see docs/serving.md#nemo-gym)."""
    source, response, truth = row
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"Question {index}?"}]},
        "response": {
            "id": f"resp_{index}",
            "created_at": 0.0,
            "model": "policy",
            "object": "response",
            "output": [
                {
                    "id": f"msg_{index}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": response, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
        "data_source": source,
        "ground_truth": truth,
    }


async def nemo_gym_verify(base: str, rows: list[Row]) -> list[float]:
    gate = asyncio.Semaphore(IN_FLIGHT)
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> float:
            async with gate:
                began = time.perf_counter()
                async with session.post(base + "/verify", json=nemo_gym_request(rows[i], i)) as a:
                    a.raise_for_status()
                    assert "reward" in await a.json()
                return time.perf_counter() - began

        return list(await asyncio.gather(*(one(i) for i in range(len(rows)))))


SCENARIOS: dict[str, Scenario] = {
    "native, 1 request": native_one_request,
    "native, verl client": native_verl_client,
    "openrlhf, 1 request": openrlhf_one_request,
    "openrlhf, per rollout": openrlhf_per_rollout,
    "nemo-gym, per rollout": nemo_gym_verify,
}
RAY_SCENARIOS = ("native, 1 request", "native, verl client")


# --------------------------------------------------------------------------- measuring


class PeakMemory(threading.Thread):
    """The peak private RSS of a process tree, sampled every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak = pid, 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak = max(self.peak, memory(self.pid)[0])


def in_process(rows: list[Row], repeats: int) -> dict[str, float]:
    from reward_plugins.router import route

    for source, response, truth in rows[:200]:
        route(SCORER, source, response, truth, {})
    walls, latencies = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        for source, response, truth in rows:
            start = time.perf_counter()
            route(SCORER, source, response, truth, {})
            latencies.append(time.perf_counter() - start)
        walls.append(time.perf_counter() - began)
    return figures(rows, walls, latencies, peak=0.0)


def phases(rows: list[Row], repeats: int) -> dict[str, float]:
    """Milliseconds per phase of one native request of every row, in this process, best of
    ``repeats``: parsing and checking the body, scoring through a pool of 1 and of 2 workers,
    and shaping the answer."""
    import orjson

    from reward_plugins.results import keys_of
    from reward_plugins.router import result_schema
    from reward_plugins.runtime.pool import ScorerPool
    from reward_plugins.serve import protocols
    from reward_plugins.serve.service import ServiceLimits

    limits = ServiceLimits()
    body = orjson.dumps(
        {"rows": [{"data_source": s, "solution_str": r, "ground_truth": t} for s, r, t in rows]}
    )

    def best(work: Callable[[], Any]) -> tuple[float, Any]:
        times, out = [], None
        for _ in range(repeats):
            began = time.perf_counter()
            out = work()
            times.append(time.perf_counter() - began)
        return 1000 * min(times), out

    found = {"body_mb": len(body) / 2**20}
    found["parse_ms"], batch = best(lambda: protocols.parse_native(body, limits, None))
    for workers in (1, 2):
        with ScorerPool(SCORER, workers=workers) as pool:
            asyncio.run(pool.score(batch.rows, {}))  # warm-up
            took, outcomes = best(lambda: asyncio.run(pool.score(batch.rows, {})))
        found[f"pool_{workers}_ms"] = took
    keys = keys_of(result_schema(SCORER, rows[0][0], {}))
    scored = protocols.Scored(keys, outcomes, 0.0)
    found["answer_ms"], _ = best(lambda: protocols.native_answer(scored, limits))
    return found


def figures(rows: list[Row], walls: list[float], latencies: list[float], peak: float) -> dict:
    return {
        "rows_per_s": len(rows) / statistics.median(walls),
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "peak_mb": peak / 2**20,
    }


def measure_server(
    command: list[str], names: tuple[str, ...], rows: list[Row], repeats: int, log: Path
) -> dict[str, dict[str, float]]:
    results = {}
    with server(command, log, START_TIMEOUT_S, path="") as (base, pid):
        for name in names:
            scenario = SCENARIOS[name]
            asyncio.run(scenario(base, rows[:256]))  # warm-up: connections, worker caches
            watcher = PeakMemory(pid)
            watcher.start()
            walls, latencies = [], []
            for _ in range(repeats):
                began = time.perf_counter()
                latencies += asyncio.run(scenario(base, rows))
                walls.append(time.perf_counter() - began)
            watcher.done.set()
            watcher.join()
            results[name] = figures(rows, walls, latencies, watcher.peak)
    return results


def serve_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "reward_plugins", "serve-rewards", "--port", "0", *arguments]


def table(results: dict[str, dict[str, float]]) -> str:
    baseline = results["in-process"]["rows_per_s"]
    lines = [
        "| scenario | rows/s | vs in-process | p50 ms | p99 ms | server peak MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, f in results.items():
        peak = f"{f['peak_mb']:.0f}" if f["peak_mb"] else "-"
        lines.append(
            f"| {name} | {f['rows_per_s']:,.0f} | {f['rows_per_s'] / baseline:.2f}x | "
            f"{f['p50_ms']:.1f} | {f['p99_ms']:.1f} | {peak} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-ray", action="store_true", help="skip Ray Serve")
    parser.add_argument("--json", type=Path, help="write the figures")
    args = parser.parse_args()
    rows = make_rows(args.seed)
    per_phase = phases(rows, args.repeats)
    results = {"in-process": in_process(rows, args.repeats)}
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "server.log"
        for workers in (1, 2):
            found = measure_server(
                serve_command("--workers", str(workers)), tuple(SCENARIOS), rows, args.repeats, log
            )
            results.update({f"{name}, {workers} worker(s)": f for name, f in found.items()})
        if not args.no_ray:
            command = serve_command("--ray", "--replicas", "2", "--workers", "1")
            found = measure_server(command, RAY_SCENARIOS, rows, args.repeats, log)
            results.update({f"ray serve 2x1, {name}": f for name, f in found.items()})
    print(f"{len(rows)} rows ({PROMPTS} prompts x {SAMPLES}), scorer {SCORER}")
    print(table(results))
    print(
        "one native request of every row ({body_mb:.1f} MB), in this process, ms: parse "
        "{parse_ms:.0f}, pool of 1 worker {pool_1_ms:.0f}, of 2 workers {pool_2_ms:.0f}, "
        "answer {answer_ms:.0f}".format(**per_phase)
    )
    if args.json is not None:
        figures_out = {"scenarios": results, "phases_ms": per_phase}
        args.json.write_text(json.dumps(figures_out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
