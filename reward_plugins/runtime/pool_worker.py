"""The parts of :class:`~reward_plugins.runtime.pool.ScorerPool` apart from its dispatcher: what a
worker process runs, the progress record it shares with the pool, the pool's records of requests,
chunks and workers, and how a worker's end is named and blamed on a row."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from reward_plugins.errors import RewardPluginsError
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import CRASH, DEADLINE, TIMEOUT, Outcome, Row

START_TIMEOUT = 120.0
"""Seconds :meth:`ScorerPool.start` waits for a worker to import the package and its plugins."""


STOP_GRACE = 2.0
"""Seconds :meth:`ScorerPool.close` waits for a worker to exit before killing it."""


class PoolError(RewardPluginsError):
    """The pool cannot score: a worker could not start, or the pool is not running."""


ROW_SEQ, ROW_INDEX, ROW_STARTED = 0, 1, 2
"""Fields of a worker's progress record (shared memory): the chunk and row it is scoring and when
it started the row (``time.monotonic()``, system-wide; 0.0 between rows)."""


def _rss_mb() -> float:
    """This process's resident set size in MiB (Linux ``/proc/self/statm``; 0.0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            resident = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def _exit_with_parent(parent: int) -> None:
    """Exit when the parent is gone (killed without :meth:`ScorerPool.close`)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


def worker_main(conn: Connection, scorer: str, progress: Any, parent: int) -> None:
    """A worker: load the plugins, say ``ready``, then score each chunk it receives.

    A chunk is ``(seq, options, deadline, rows)``, each row ``(data_source, solution_str,
    ground_truth, extra_info)``; the reply is ``("done", seq, outcomes, seconds, rss_mb)``.
    ``None`` (or the parent's end closing) stops the worker.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    try:
        from reward_plugins import registry
        from reward_plugins.runtime.scoring import score_one

        registry.load_plugins()
        registry.registrations_named(scorer)
    except BaseException as error:  # reported to the parent, which raises it in start()
        conn.send(("error", f"{type(error).__name__}: {error}"))
        return
    conn.send(("ready", os.getpid(), _rss_mb()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        seq, options, deadline, rows = message
        started = time.perf_counter()
        outcomes: list[Outcome] = []
        progress[ROW_SEQ] = seq
        for index, (source, response, truth, extra_info) in enumerate(rows):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                outcomes.append(deadline_failure())
                continue
            progress[ROW_INDEX] = index
            progress[ROW_STARTED] = now
            outcomes.append(score_one(scorer, options, source, response, truth, extra_info))
        progress[ROW_STARTED] = 0.0
        conn.send(("done", seq, outcomes, time.perf_counter() - started, _rss_mb()))


def deadline_failure() -> RowFailure:
    return RowFailure(DEADLINE, "deadline: the request's deadline passed before the row started")


_main_swap = threading.Lock()


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start a worker without the parent's ``__main__``: ``spawn`` would otherwise run the
    parent's script again in every worker (as ``__mp_main__``), and a script, notebook or doc
    snippet without an ``if __name__ == "__main__"`` guard would start a pool in each worker. A
    worker needs only the package and the plugins' entry points, never the parent's script."""
    with _main_swap:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = main


def how_it_died(exitcode: int | None) -> str:
    """``"signal SIGSEGV"`` or ``"exit code 3"``."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"


def blamed_failure(cause: str, row_timeout: float, worker: Worker) -> RowFailure:
    """The outcome of the row ``worker`` was scoring when it was killed for running past
    ``row_timeout`` (``cause`` :data:`TIMEOUT`) or died (:data:`CRASH`)."""
    if cause == TIMEOUT:
        return RowFailure(
            TIMEOUT,
            f"timeout: the row ran past the row timeout {row_timeout:g} s; "
            "its worker was killed and replaced",
        )
    return RowFailure(
        CRASH,
        f"crash: the worker died while scoring the row ({how_it_died(worker.process.exitcode)}); "
        "it was replaced",
    )


# ------------------------------------------------------------------------ the pool's records


@dataclass(eq=False)
class Request:
    """One :meth:`ScorerPool.score` call: its rows, their outcomes as they come, its future."""

    rows: Sequence[Row]
    options: dict[str, Any]
    deadline: float | None
    future: concurrent.futures.Future[list[Outcome]]
    outcomes: list[Outcome | None]
    unresolved: int
    next_row: int = 0  # rows before it were taken into chunks
    retry: deque[tuple[list[int], int]] = field(default_factory=deque)  # (rows, attempt)
    cancelled: bool = False

    def unstarted(self) -> list[int]:
        """Rows not yet sent to a worker."""
        waiting = [index for rows, _ in self.retry for index in rows]
        return waiting + list(range(self.next_row, len(self.rows)))

    def has_work(self) -> bool:
        return bool(self.retry) or self.next_row < len(self.rows)


@dataclass(eq=False)
class Chunk:
    request: Request
    rows: list[int]  # indexes into request.rows
    attempt: int
    seq: int


@dataclass(eq=False)
class Worker:
    process: Any  # multiprocessing.context.SpawnProcess
    conn: Connection
    progress: Any  # RawArray("d", 3), see ROW_SEQ
    ready: bool = False
    chunk: Chunk | None = None
    retiring: bool = False  # recycled for memory: stop once its chunk is done
    killed_for: str | None = None  # "timeout" when the pool killed it
    overdue_started: float = 0.0  # when the row it was killed for started

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)


def spawn_worker(context: Any, scorer: str) -> Worker:
    """Start one worker process for ``scorer`` (``context``: a ``spawn`` multiprocessing
    context), without the parent's ``__main__`` (:func:`main_module_hidden`)."""
    parent_conn, child_conn = context.Pipe()
    progress = context.RawArray(ctypes.c_double, 3)
    process = context.Process(
        target=worker_main,
        args=(child_conn, scorer, progress, os.getpid()),
        name=f"reward_plugins scorer {scorer}",
        daemon=True,
    )
    with main_module_hidden():
        process.start()
    child_conn.close()
    return Worker(process, parent_conn, progress)


def wait_ready(worker: Worker, deadline: float, scorer: str) -> float:
    """Wait (until the :func:`time.monotonic` ``deadline``) for ``worker``'s ``ready``; its RSS
    in MiB.

    Raises:
        PoolError: the worker did not start in time, exited, or could not load ``scorer``.
    """
    remaining = deadline - time.monotonic()
    if not wait([worker.conn, worker.process.sentinel], max(0.0, remaining)):
        raise PoolError(f"a worker did not start within {START_TIMEOUT:g} s")
    try:
        message = worker.conn.recv()
    except (EOFError, OSError):
        worker.process.join()
        raise PoolError(
            f"a worker exited while starting ({how_it_died(worker.process.exitcode)}; "
            "its error is on standard error)"
        ) from None
    if message[0] == "error":
        raise PoolError(f"a worker could not load scorer {scorer!r}: {message[1]}")
    worker.ready = True
    return float(message[2])


def stop_workers(workers: Sequence[Worker]) -> None:
    """Ask every worker to stop, kill those still running after :data:`STOP_GRACE`, reap them
    all and close their pipes."""
    for worker in workers:
        with contextlib.suppress(OSError):
            worker.conn.send(None)
    until = time.monotonic() + STOP_GRACE
    for worker in workers:
        worker.process.join(max(0.0, until - time.monotonic()))
        if worker.process.exitcode is None:
            with contextlib.suppress(OSError):
                os.kill(worker.pid, signal.SIGKILL)
            worker.process.join()
        worker.conn.close()
