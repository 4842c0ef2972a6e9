"""The reward server's worker pool, with real worker processes and a real misbehaving plugin.

The plugin ``tests/serve_plugins/rp_pool_probe.py`` is found the way an installed plugin is: by an
entry point of the group ``reward_plugins`` in a ``.dist-info`` directory this module writes to a
temporary directory, put on ``PYTHONPATH`` (inherited by the workers) and on ``sys.path`` (for this
process, which checks the scorer and computes the expected values in-process). Its responses
trigger a hang, a segfault, an exit, a leak or a slow row; every other row must come back exactly
as :func:`reward_plugins.router.route` scores it in this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from serve_probe import PROBE, children_of, probe_installed

from reward_plugins import UnknownScorer
from reward_plugins.errors import RewardPluginsError
from reward_plugins.router import route
from reward_plugins.runtime.pool import Overloaded, PoolError, ScorerPool
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import CRASH, DEADLINE, TIMEOUT, Outcome, Row

PLUGINS = Path(__file__).resolve().parent / "serve_plugins"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def probe_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The probe plugin installed by an entry point, for this process and the workers."""
    with probe_installed(tmp_path_factory.mktemp("site")):
        yield


@pytest.fixture
def pool_factory() -> Iterator[Any]:
    """``make(**kwargs)``: a started probe pool, closed after the test."""
    pools: list[ScorerPool] = []

    def make(scorer: str = PROBE, **kwargs: Any) -> ScorerPool:
        pool = ScorerPool(scorer, **kwargs)
        pools.append(pool)
        pool.start()
        return pool

    yield make
    for pool in pools:
        pool.close()


def probe_row(response: str, gold: str = "paris") -> Row:
    return Row(PROBE, response, [gold])


def good_rows(count: int, start: int = 0) -> list[Row]:
    """Rows of the probe's ordinary path: every other one right."""
    return [probe_row(f"answer {i}" if i % 2 else "paris", "paris") for i in range(start, count)]


def expected(rows: Sequence[Row], options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each row scored in this process."""
    options = options or {}
    return [
        route(PROBE if r.data_source == PROBE else "compute_score", r.data_source,
              r.solution_str, r.ground_truth, options, extra_info=r.extra_info)
        for r in rows
    ]  # fmt: skip


def score(pool: ScorerPool, rows: Sequence[Row], options: dict[str, Any] | None = None,
          deadline: float | None = None) -> list[Outcome]:  # fmt: skip
    return asyncio.run(pool.score(rows, options or {}, deadline))


def wait_for(condition: Callable[[], bool], seconds: float = 60.0) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (a generous bound, polled)."""
    until = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > until:
            return False
        time.sleep(0.05)
    return True


# ---------------------------------------------------------------------------------- the tests


def test_good_rows_equal_in_process_scoring(pool_factory: Any) -> None:
    pool = pool_factory(workers=2)
    rows = good_rows(150)
    assert score(pool, rows, {"scale": 0.5}) == expected(rows, {"scale": 0.5})
    assert score(pool, rows) == expected(rows)
    stats = pool.stats()
    assert (stats["workers_alive"], stats["rows_scored"], stats["rows_pending"]) == (2, 300, 0)
    assert stats["replaced"] == {} and stats["failures"] == {}


def test_a_built_in_scorer_through_the_pool_equals_route(pool_factory: Any) -> None:
    pool = pool_factory("compute_score")
    rows = [
        Row("searchR1_nq", f"<think>x</think><answer>{answer}</answer>", {"target": ["Paris"]})
        for answer in ("Paris", "paris!", "Lyon", "")
    ] + [Row("searchR1_nq", "no tags at all", {"target": ["Paris"]})]
    results = score(pool, rows, {"format_score": 0.1})
    assert results == expected(rows, {"format_score": 0.1})
    assert [r["score"] if isinstance(r, dict) else r for r in results] == [1, 1, 0.1, 0.1, 0]


def test_engine_failures_are_row_failures(pool_factory: Any) -> None:
    pool = pool_factory()
    rows = [probe_row("paris"), probe_row("RAISE"), Row("nowhere", "x", ["x"]), probe_row("x")]
    results = score(pool, rows)
    assert results[0] == expected(rows[:1])[0] and results[3] == expected(rows[3:])[0]
    assert isinstance(results[1], RowFailure) and results[1].reason == "scorer error"
    assert "the probe was asked to raise" in results[1].detail
    assert isinstance(results[2], RowFailure) and results[2].reason == "unknown data source"
    assert pool.stats()["replaced"] == {}  # an exception costs no worker


def test_a_hanging_row_times_out_and_the_rest_go_on(
    pool_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pool = pool_factory(workers=1, row_timeout=1.0)
    rows = good_rows(20)
    rows[7] = probe_row("HANG here")
    first_pid = pool.worker_pids()
    with caplog.at_level(logging.WARNING, logger="reward_plugins.runtime.pool"):
        results = score(pool, rows)
    failure = results[7]
    assert isinstance(failure, RowFailure) and failure.reason == TIMEOUT
    assert "row timeout 1 s" in failure.detail
    good = [i for i in range(20) if i != 7]
    assert [results[i] for i in good] == expected([rows[i] for i in good])
    stats = pool.stats()
    assert stats["replaced"] == {"timeout": 1}
    assert stats["failures"] == {TIMEOUT: 1} and stats["rows_scored"] == 19
    assert stats["rows_pending"] == 0
    assert pool.worker_pids() != first_pid  # a new worker ...
    assert score(pool, good_rows(30)) == expected(good_rows(30))  # ... that scores
    lines = [r for r in caplog.records if r.name == "reward_plugins.runtime.pool"]
    assert len(lines) == 1 and "row timeout 1 s" in lines[0].getMessage()
    assert lines[0].exc_info is None


@pytest.mark.parametrize(("trigger", "how"), [("SEGV", "signal SIGSEGV"), ("EXIT3", "exit code 3")])
def test_a_worker_that_dies_costs_its_row_alone(pool_factory: Any, trigger: str, how: str) -> None:
    pool = pool_factory(workers=2)
    rows = good_rows(200)
    for i in (3, 150):
        rows[i] = probe_row(trigger)
    results = score(pool, rows)
    for i in (3, 150):
        failure = results[i]
        assert isinstance(failure, RowFailure) and failure.reason == CRASH
        assert how in failure.detail
    good = [i for i in range(200) if i not in (3, 150)]
    assert [results[i] for i in good] == expected([rows[i] for i in good])
    stats = pool.stats()
    assert stats["replaced"] == {"crash": 2} and stats["failures"] == {CRASH: 2}
    assert stats["rows_scored"] == 198
    assert score(pool, good_rows(10)) == expected(good_rows(10))
    assert wait_for(lambda: pool.stats()["workers_alive"] == 2)  # both replaced, in the background


@pytest.mark.slow  # a pool of its own, killed mid-row and respawned
def test_a_worker_killed_from_outside_costs_its_row(pool_factory: Any) -> None:
    """As the kernel's OOM killer does: SIGKILL from another process."""
    pool = pool_factory(workers=1, row_timeout=60.0)
    (pid,) = pool.worker_pids()
    rows = [*good_rows(3), probe_row("HANG"), *good_rows(3)]

    async def kill_while_scoring() -> list[Outcome]:
        call = asyncio.ensure_future(pool.score(rows, {}))
        await asyncio.sleep(0.5)  # on the hanging row
        os.kill(pid, signal.SIGKILL)
        return await call

    results = asyncio.run(kill_while_scoring())
    failure = results[3]
    assert isinstance(failure, RowFailure) and failure.reason == CRASH
    assert "signal SIGKILL" in failure.detail
    assert results[:3] + results[4:] == expected(rows[:3] + rows[4:])
    assert pool.stats()["replaced"] == {"crash": 1}


@pytest.mark.slow  # four respawns, backing off
def test_a_scorer_that_crashes_every_row_is_replaced_with_backoff(pool_factory: Any) -> None:
    pool = pool_factory(workers=1)
    rows = [probe_row("SEGV")] * 4 + good_rows(3)
    results = score(pool, rows)
    assert [getattr(r, "reason", None) for r in results[:4]] == [CRASH] * 4
    assert results[4:] == expected(rows[4:])
    assert pool.stats()["replaced"] == {"crash": 4}


@pytest.mark.slow  # 480 MiB of leaks, workers recycled
def test_a_leaking_scorer_is_recycled_by_its_memory(pool_factory: Any) -> None:
    pool = pool_factory(workers=1, max_worker_rss_mb=250.0)  # a fresh worker: well under 150
    rows = [probe_row(f"LEAK {i}") for i in range(60)]  # 8 MiB each: 480 MiB without recycling
    results = score(pool, rows)
    # scored in the workers alone: in this process the rows would keep 480 MiB
    want = [{"score": 0.0, "length": len(f"LEAK {i}") / 1000} for i in range(60)]
    assert results == want
    stats = pool.stats()
    assert stats["replaced"].get("memory", 0) >= 1 and "crash" not in stats["replaced"]
    assert stats["rows_scored"] == 60 and stats["workers_alive"] == 1


@pytest.mark.slow  # waits out a row timeout of 3 s
def test_rows_not_started_by_the_deadline_fail(pool_factory: Any) -> None:
    pool = pool_factory(workers=1, row_timeout=3.0)
    rows = good_rows(5)
    past = score(pool, rows, deadline=time.monotonic() - 1)
    assert [getattr(r, "reason", None) for r in past] == [DEADLINE] * 5

    async def blocked() -> tuple[list[Outcome], list[Outcome]]:
        hanging = asyncio.ensure_future(pool.score([probe_row("HANG")], {}))
        await asyncio.sleep(0.5)  # the worker is stuck on the hanging row
        late = await pool.score(rows, {}, time.monotonic() + 0.5)
        return late, await hanging

    late, hung = asyncio.run(blocked())
    assert [getattr(r, "reason", None) for r in late] == [DEADLINE] * 5
    assert isinstance(hung[0], RowFailure) and hung[0].reason == TIMEOUT
    assert score(pool, rows, deadline=time.monotonic() + 60) == expected(rows)


def test_overloaded_refuses_at_once(pool_factory: Any) -> None:
    pool = pool_factory(workers=1, max_pending_rows=10)
    with pytest.raises(Overloaded, match="max_pending_rows=10") as refused:
        score(pool, good_rows(11))
    assert isinstance(refused.value, RewardPluginsError)
    assert score(pool, good_rows(10)) == expected(good_rows(10))
    assert pool.stats()["rows_pending"] == 0


def test_concurrent_calls_each_get_their_rows_in_order(pool_factory: Any) -> None:
    pool = pool_factory(workers=2)
    requests = [good_rows(n, start=n) for n in (1, 7, 64, 130, 3, 500)]

    async def all_at_once() -> list[list[Outcome]]:
        return await asyncio.gather(*(pool.score(rows, {}) for rows in requests))

    assert asyncio.run(all_at_once()) == [expected(rows) for rows in requests]


@pytest.mark.slow  # 1.6 s of scoring
def test_a_small_call_is_not_stuck_behind_a_big_one(pool_factory: Any) -> None:
    pool = pool_factory(workers=1)
    big = [probe_row(f"NAP {i}") for i in range(800)]  # 2 ms a row: 1.6 s of scoring
    small = [probe_row("paris")]

    async def big_then_small() -> tuple[bool, list[Outcome], list[Outcome]]:
        big_call = asyncio.ensure_future(pool.score(big, {}))
        await asyncio.sleep(0.2)
        small_result = await pool.score(small, {})
        big_was_done = big_call.done()
        return big_was_done, small_result, await big_call

    big_was_done, small_result, big_result = asyncio.run(big_then_small())
    assert not big_was_done
    assert small_result == expected(small) and big_result == expected(big)


@pytest.mark.slow  # a pool of its own, a cancelled call
def test_a_cancelled_call_gives_its_unstarted_rows_up(pool_factory: Any) -> None:
    pool = pool_factory(workers=1)
    rows = [probe_row(f"NAP {i}") for i in range(2000)]  # 4 s of scoring

    async def give_up() -> None:
        await asyncio.wait_for(pool.score(rows, {}), 0.3)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(give_up())
    assert wait_for(lambda: pool.stats()["rows_pending"] == 0)
    assert pool.stats()["rows_scored"] < 1000  # the rest were never sent to the worker
    assert score(pool, good_rows(5)) == expected(good_rows(5))


def test_start_refuses_an_unknown_scorer() -> None:
    pool = ScorerPool("no_such_scorer_anywhere")
    with pytest.raises(UnknownScorer, match="no_such_scorer_anywhere"):
        pool.start()
    assert children_of(os.getpid(), b"spawn_main") == []
    with pytest.raises(PoolError, match="not running"):
        asyncio.run(pool.score(good_rows(1), {}))


def test_start_refuses_a_limit_under_a_fresh_worker() -> None:
    pool = ScorerPool(PROBE, max_worker_rss_mb=1.0)
    with pytest.raises(PoolError, match="max_worker_rss_mb=1"):
        pool.start()
    assert children_of(os.getpid(), b"spawn_main") == []


@pytest.mark.slow  # closes a pool while a worker hangs
def test_close_leaves_no_child_process(pool_factory: Any) -> None:
    pool = pool_factory(workers=2, row_timeout=60.0)
    pids = pool.worker_pids()
    assert len(pids) == 2 and sorted(children_of(os.getpid(), b"spawn_main")) == sorted(pids)

    async def close_while_hanging() -> BaseException | list[Outcome]:
        hanging = asyncio.ensure_future(pool.score([probe_row("HANG")], {}))
        await asyncio.sleep(0.5)
        await asyncio.get_running_loop().run_in_executor(None, pool.close)
        try:
            return await hanging
        except PoolError as error:
            return error

    outcome = asyncio.run(close_while_hanging())
    assert isinstance(outcome, PoolError)
    assert children_of(os.getpid(), b"spawn_main") == []
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists()
    pool.close()  # again: nothing to do


def test_a_script_without_a_main_guard_starts_a_pool(tmp_path: Path) -> None:
    """``spawn`` re-runs the parent's script in each worker unless the pool hides it; a script
    with no ``if __name__ == "__main__"`` guard would then start a pool in every worker."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import asyncio\n"
        "from reward_plugins.runtime.pool import ScorerPool\n"
        "from reward_plugins.runtime.scoring import Row\n"
        "row = Row('searchR1_nq', '<answer>Paris</answer>', {'target': ['Paris']})\n"
        "with ScorerPool('compute_score', workers=1) as pool:\n"
        "    print(asyncio.run(pool.score([row], {}))[0]['score'])\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert (done.returncode, done.stdout) == (0, "1.0\n"), done.stderr[-2000:]
