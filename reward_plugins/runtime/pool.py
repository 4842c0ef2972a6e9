"""A pool of worker processes that score rows, bounded so that no scorer can take the server down.

The reward server runs other people's scorers; one that hangs, segfaults or leaks must cost its
own row, never the server or the other rows (verl's runs froze on a hanging ``math_dapo`` scorer,
github.com/volcengine/verl pull 6673, and were zeroed by ``signal.alarm`` in Ray workers, pull
5635). :class:`ScorerPool` scores every row in a worker process and guarantees:

- **A row timeout** (``row_timeout``): a row that runs longer is answered
  ``RowFailure(TIMEOUT, ...)``; its worker is killed (``SIGKILL``) and replaced.
- **Crash isolation**: a worker that dies while scoring (a segfault, ``os._exit``, the kernel's
  OOM killer) costs the row it was scoring ``RowFailure(CRASH, ...)`` naming the signal or exit
  code; the worker is replaced.
- **Nothing lost, nothing twice**: the other rows a dead worker held are dispatched again (their
  results had not come back, so none of them is in an answer yet); each row gets exactly one
  outcome. A row whose chunk was lost :data:`MAX_ATTEMPTS` times with no row to blame gets
  ``CRASH``.
- **Bounded memory**: after each chunk the worker reads its resident set size
  (``/proc/self/statm``); over ``max_worker_rss_mb`` it is recycled: it gets no more work, a
  replacement starts, and it exits. A leaking scorer so never grows a worker past the limit plus
  one chunk's growth. A fresh worker over the limit is refused at :meth:`ScorerPool.start`.
- **Fairness**: rows are sent in chunks sized by measurement (about :data:`TARGET_CHUNK_SECONDS`
  of scoring, at most :data:`MAX_CHUNK_ROWS` rows) and the chunks of concurrent requests are
  taken round robin, so a big request never holds every worker while a small one waits.
- **A deadline** per call: rows not started by it are answered ``RowFailure(DEADLINE, ...)``.
- **Backpressure**: :meth:`ScorerPool.score` raises :class:`Overloaded` at once when its rows
  would take the rows waiting past ``max_pending_rows`` (the server answers 503).
- **No spinning**: replacements after crashes and timeouts back off (up to
  :data:`MAX_BACKOFF_SECONDS`) while no chunk completes, so a scorer that crashes every row does
  not make the pool respawn in a loop; spawning never blocks the caller's event loop (a
  dispatcher thread owns the workers).

Workers start with the ``spawn`` method (the server runs threads and an event loop, which a
``fork`` would copy half-held), import the package, load the plugins
(:func:`reward_plugins.registry.load_plugins`: the entry points of the environment they inherit)
and score with :func:`reward_plugins.runtime.scoring.score_one`, so a scorer's exception is the
row's ``RowFailure`` exactly as in ``reward-plugins score``. Each timeout, crash and recycle is
one log line (logger ``reward_plugins.runtime.pool``), never a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import multiprocessing
import os
import pickle
import selectors
import signal
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

from reward_plugins.errors import RewardPluginsError
from reward_plugins.runtime.pool_worker import (
    ROW_INDEX,
    ROW_SEQ,
    ROW_STARTED,
    START_TIMEOUT,
    Chunk,
    PoolError,
    Request,
    Worker,
    blamed_failure,
    deadline_failure,
    how_it_died,
    spawn_worker,
    stop_workers,
    wait_ready,
)
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import CRASH, DEADLINE, TIMEOUT, Outcome, Row

logger = logging.getLogger(__name__)

TARGET_CHUNK_SECONDS = 0.005
"""A chunk holds about this much scoring (by the measured mean time per row): long enough that a
chunk's round trip between processes costs little per row, short enough that another request's
chunk waits at most this long for a worker."""
MAX_CHUNK_ROWS = 128
"""The most rows in one chunk (a fast scorer's chunk); see :data:`TARGET_CHUNK_SECONDS`.
Measured on Search-R1's ``compute_score`` (about 8 us a row): 2,560 rows through one worker ran
at about 60-90 thousand rows/s with chunks of 64 to 256 rows, and at under 30 thousand with
chunks of 8 to 16 (a round trip per chunk costs about 0.1-0.3 ms); 128 rows are about 1 ms of
that scorer, so a small request waits about that long for a worker."""
FIRST_CHUNK_ROWS = 8
"""The chunk size before any time per row is measured."""
MAX_ATTEMPTS = 3
"""A row is sent to a worker at most this often when its worker dies with no row to blame."""
MAX_BACKOFF_SECONDS = 2.0
"""The longest wait before replacing a crashed or timed-out worker, reached after consecutive
failures with no chunk completed (the wait doubles from 50 ms)."""


class Overloaded(RewardPluginsError):
    """The pool holds too many rows waiting: :meth:`ScorerPool.score` refused the call (the
    server answers 503 with ``Retry-After``)."""


class ScorerPool:
    """``workers`` processes scoring rows with the scorer named ``scorer``.

    Use: ``pool.start()`` (blocking: spawns and warms the workers), then ``await pool.score(rows,
    options, deadline)`` from any event loop, any number of calls at once; ``pool.close()`` at
    the end (also as a context manager). :meth:`score` is a
    :data:`reward_plugins.runtime.scoring.ScoreRows`.

    Args:
        scorer: a registered scorer name (checked in this process, then in each worker).
        workers: how many worker processes score at once.
        row_timeout: seconds one row may run before its worker is killed (``TIMEOUT``).
        max_worker_rss_mb: a worker whose resident memory exceeds this after a chunk is
            recycled.
        max_pending_rows: the most rows waiting or being scored, over all calls; a call that
            would exceed it raises :class:`Overloaded`.
    """

    def __init__(
        self,
        scorer: str,
        *,
        workers: int = 1,
        row_timeout: float = 10.0,
        max_worker_rss_mb: float = 2048.0,
        max_pending_rows: int = 100_000,
    ) -> None:
        if type(workers) is not int or workers < 1:
            raise PoolError(f"workers must be an int >= 1, got {type(workers).__name__}: {workers}")
        for name, value in (("row_timeout", row_timeout), ("max_worker_rss_mb", max_worker_rss_mb)):
            if not isinstance(value, (int, float)) or not value > 0:
                raise PoolError(f"{name} must be a number > 0, got {type(value).__name__}: {value}")
        if type(max_pending_rows) is not int or max_pending_rows < 1:
            raise PoolError(
                f"max_pending_rows must be an int >= 1, got {type(max_pending_rows).__name__}: "
                f"{max_pending_rows}"
            )
        self.scorer = scorer
        self.workers = workers
        self.row_timeout = float(row_timeout)
        self.max_worker_rss_mb = float(max_worker_rss_mb)
        self.max_pending_rows = max_pending_rows
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()  # guards the inbox, the counters and _pending
        self._inbox: list[Request] = []
        self._pending = 0
        self._replaced: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._scored = 0
        self._workers: list[Worker] = []  # the dispatcher thread's alone once started
        self._active: deque[Request] = deque()  # requests with rows to send, round robin
        self._respawn_at: list[float] = []  # monotonic times of replacements due
        self._strikes = 0  # crashes and timeouts since a chunk last completed
        self._seq = 0
        self._seconds_per_row: float | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()  # the wake socket, each worker's pipe and
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)  # process sentinel
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Spawn the workers and wait until each has loaded the plugins.

        Raises:
            UnknownScorer: no scorer is registered under ``scorer`` (in this process).
            PoolError: a worker could not start (its error, one line), or a fresh worker is
                already over ``max_worker_rss_mb``.
        """
        from reward_plugins import registry

        if self._thread is not None or self._closed:
            raise PoolError("the pool was already started")
        registry.load_plugins()  # finds entry points added since the package was first loaded
        registry.registrations_named(self.scorer)
        try:
            for _ in range(self.workers):
                self._workers.append(self._spawn())
            deadline = time.monotonic() + START_TIMEOUT
            for worker in self._workers:
                rss = wait_ready(worker, deadline, self.scorer)
                if rss > self.max_worker_rss_mb:
                    raise PoolError(
                        f"a fresh worker already uses {rss:.0f} MiB, over max_worker_rss_mb="
                        f"{self.max_worker_rss_mb:g}: raise the limit"
                    )
        except BaseException:
            self._stop_workers()
            self._closed = True
            self._release()
            raise
        self._thread = threading.Thread(
            target=self._dispatch, name="reward_plugins.runtime.pool", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the workers (killing any still scoring after
        :data:`~reward_plugins.runtime.pool_worker.STOP_GRACE` s) and fail the calls still waiting
        with :class:`PoolError`; no worker process outlives this call."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._closing = True
            self._wake()
            self._thread.join()
        else:
            self._stop_workers()
        self._release()

    def _release(self) -> None:
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> ScorerPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the API

    async def score(
        self, rows: Sequence[Row], options: Mapping[str, Any], deadline: float | None = None
    ) -> list[Outcome]:
        """One outcome per row, in order: the scorer's dict, or a
        :class:`~reward_plugins.runtime.rows.RowFailure` (``TIMEOUT``, ``CRASH``, ``DEADLINE`` or
        the engine's kinds, see :func:`reward_plugins.runtime.scoring.score_one`).

        ``deadline`` is a :func:`time.monotonic` time; rows not started by then fail with
        ``DEADLINE``. Cancelling the call drops its rows not yet started.

        Raises:
            Overloaded: the rows would take the pool's waiting rows past ``max_pending_rows``.
            PoolError: the pool is not running (not started, or closed).
        """
        if not rows:
            return []
        future: concurrent.futures.Future[list[Outcome]] = concurrent.futures.Future()
        future.set_running_or_notify_cancel()  # only the dispatcher ends it (no cancel race)
        request = Request(rows, dict(options), deadline, future, [None] * len(rows), len(rows))
        with self._lock:
            if self._thread is None or self._closing or self._closed:
                raise PoolError("the scorer pool is not running")
            if self._pending + len(rows) > self.max_pending_rows:
                raise Overloaded(
                    f"the scorer pool holds {self._pending} rows; {len(rows)} more would exceed "
                    f"max_pending_rows={self.max_pending_rows}"
                )
            self._pending += len(rows)
            self._inbox.append(request)
        self._wake()
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            request.cancelled = True
            self._wake()
            raise

    def stats(self) -> dict[str, Any]:
        """Counters for ``GET /health``: ``workers`` (configured), ``workers_alive`` (started
        and ready), ``replaced`` (by cause: ``timeout``, ``crash``, ``memory``),
        ``rows_scored``, ``failures`` (by kind), ``rows_pending``, and the limits."""
        with self._lock:
            return {
                "workers": self.workers,
                "workers_alive": sum(1 for w in list(self._workers) if w.ready),
                "replaced": dict(self._replaced),
                "rows_scored": self._scored,
                "failures": dict(self._failures),
                "rows_pending": self._pending,
                "row_timeout": self.row_timeout,
                "max_worker_rss_mb": self.max_worker_rss_mb,
                "max_pending_rows": self.max_pending_rows,
            }

    def worker_pids(self) -> list[int]:
        """The process ids of the workers (for tests and diagnostics)."""
        return [w.pid for w in list(self._workers)]

    # ------------------------------------------------------------------ the dispatcher

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake is pending anyway) or closed
            self._wake_w.send(b"\0")

    def _spawn(self) -> Worker:
        worker = spawn_worker(self._context, self.scorer)
        self._selector.register(worker.conn, selectors.EVENT_READ, (worker, "conn"))
        self._selector.register(worker.process.sentinel, selectors.EVENT_READ, (worker, "sentinel"))
        return worker

    def _dispatch(self) -> None:
        """The dispatcher thread: owns the workers; routes chunks, results, deaths."""
        try:
            while not self._closing:
                self._step()
        except BaseException as error:  # pragma: no cover - a defect; never leave callers hanging
            logger.error("reward_plugins: scorer pool stopped: %s: %s", type(error).__name__, error)
        finally:
            self._closing = True
            self._fail_everything(PoolError("the scorer pool was closed"))
            self._stop_workers()

    def _step(self) -> None:
        died: list[Worker] = []
        for key, _ in self._selector.select(self._wait_time()):
            if key.data is None:
                with contextlib.suppress(OSError):
                    while self._wake_r.recv(4096):
                        pass
            elif key.data[1] == "conn":
                self._receive(key.data[0])
            else:
                died.append(key.data[0])
        for worker in died:
            if worker in self._workers:
                self._bury(worker)
        self._kill_overdue()
        with self._lock:
            inbox, self._inbox = self._inbox, []
        self._active.extend(inbox)
        self._expire()
        self._respawn()
        self._send()

    def _wait_time(self) -> float:
        now = time.monotonic()
        times = [now + 1.0, *self._respawn_at]
        times += [r.deadline for r in self._active if r.deadline is not None]
        if any(w.chunk is not None for w in self._workers):
            times.append(now + min(0.1, self.row_timeout / 10))
        return max(0.0, min(times) - now)

    def _receive(self, worker: Worker) -> None:
        """Take every message ``worker`` sent (its startup note, its chunks' outcomes)."""
        while True:
            try:
                if not worker.conn.poll():
                    return
                message = worker.conn.recv()
            except (EOFError, OSError):
                return
            if message[0] == "ready":
                worker.ready = True
            elif message[0] == "error":
                logger.warning("reward_plugins: a scorer worker could not start: %s", message[1])
            else:
                self._finish_chunk(worker, message)

    def _finish_chunk(self, worker: Worker, message: tuple[Any, ...]) -> None:
        _, seq, outcomes, seconds, rss = message
        chunk = worker.chunk
        worker.chunk = None
        self._strikes = 0
        if chunk is None or chunk.seq != seq:  # pragma: no cover - one chunk at a time
            return
        per_row = seconds / max(1, len(outcomes))
        measured = self._seconds_per_row
        self._seconds_per_row = per_row if measured is None else 0.8 * measured + 0.2 * per_row
        for index, outcome in zip(chunk.rows, outcomes, strict=True):
            self._resolve(chunk.request, index, outcome)
        if rss > self.max_worker_rss_mb and not worker.retiring:
            worker.retiring = True
            logger.warning(
                "reward_plugins: scorer worker %d uses %.0f MiB, over max_worker_rss_mb=%g: "
                "recycled",
                worker.pid,
                rss,
                self.max_worker_rss_mb,
            )
            with contextlib.suppress(OSError):
                worker.conn.send(None)
            self._respawn_at.append(time.monotonic())

    def _resolve(self, request: Request, index: int, outcome: Outcome) -> None:
        """Record row ``index``'s outcome; answer the request once every row has one."""
        if request.outcomes[index] is not None:  # pragma: no cover - each row resolves once
            return
        request.outcomes[index] = outcome
        request.unresolved -= 1
        with self._lock:
            self._pending -= 1
            if isinstance(outcome, RowFailure):
                self._failures[outcome.reason] += 1
            else:
                self._scored += 1
        if request.unresolved == 0 and not request.future.done():
            request.future.set_result(list(request.outcomes))  # type: ignore[arg-type]

    def _drop(self, request: Request, indexes: Sequence[int]) -> None:
        """Rows of a cancelled request that will not be scored: no longer pending."""
        for index in indexes:
            if request.outcomes[index] is None:
                request.outcomes[index] = RowFailure(DEADLINE, "cancelled")
                request.unresolved -= 1
                with self._lock:
                    self._pending -= 1

    def _kill_overdue(self) -> None:
        now = time.monotonic()
        for worker in list(self._workers):
            started = worker.progress[ROW_STARTED]
            if worker.chunk is None or started == 0.0 or now - started <= self.row_timeout:
                continue
            worker.killed_for, worker.overdue_started = TIMEOUT, started
            with contextlib.suppress(OSError):
                os.kill(worker.pid, signal.SIGKILL)
            worker.process.join()
            self._bury(worker)

    def _bury(self, worker: Worker) -> None:
        """A worker exited: take what it sent, count its loss, schedule its replacement, and
        settle the chunk it held (:meth:`_settle`)."""
        self._receive(worker)
        worker.process.join()
        self._selector.unregister(worker.conn)
        self._selector.unregister(worker.process.sentinel)
        worker.conn.close()
        self._workers.remove(worker)
        if worker.retiring and worker.chunk is None:
            with self._lock:
                self._replaced["memory"] += 1
            return  # its replacement was scheduled when it was recycled
        cause = TIMEOUT if worker.killed_for == TIMEOUT else CRASH
        with self._lock:
            self._replaced[cause] += 1
        self._strikes += 1
        delay = 0.0 if self._strikes <= 1 else min(MAX_BACKOFF_SECONDS, 0.05 * 2**self._strikes)
        if delay >= MAX_BACKOFF_SECONDS > 0.05 * 2 ** (self._strikes - 1):  # once, on reaching it
            logger.warning(
                "reward_plugins: %d scorer workers lost in a row with no chunk completed; "
                "waiting %g s before each replacement",
                self._strikes,
                delay,
            )
        if not worker.retiring:  # a recycled worker's replacement is already due
            self._respawn_at.append(time.monotonic() + delay)
        self._settle(worker, cause)

    def _settle(self, worker: Worker, cause: str) -> None:
        """Blame the row a lost worker was scoring (its outcome: ``cause``'s failure) and send
        the chunk's other rows again; a chunk lost :data:`MAX_ATTEMPTS` times with no row to
        blame fails whole."""
        chunk, how = worker.chunk, how_it_died(worker.process.exitcode)
        if chunk is None:
            state = "idle" if worker.ready else "starting"
            logger.warning(
                "reward_plugins: scorer worker %d died while %s (%s); replaced",
                worker.pid,
                state,
                how,
            )
            return
        blamed = None
        started = worker.progress[ROW_STARTED]
        if started != 0.0 and int(worker.progress[ROW_SEQ]) == chunk.seq:
            blamed = int(worker.progress[ROW_INDEX])
        if cause == TIMEOUT and started != worker.overdue_started:
            blamed = None  # the overdue row ended as it was killed: none is to blame
        request, rows = chunk.request, chunk.rows
        lost = "was killed" if cause == TIMEOUT else f"died ({how})"
        if blamed is not None:
            index = rows[blamed]
            logger.warning(
                "reward_plugins: scorer worker %d %s on a row of data source %.80r; replaced",
                worker.pid,
                f"ran past the row timeout {self.row_timeout:g} s" if cause == TIMEOUT else lost,
                request.rows[index].data_source,
            )
            self._resolve(request, index, blamed_failure(cause, self.row_timeout, worker))
            rows = rows[:blamed] + rows[blamed + 1 :]
            if not rows:
                return
        else:
            logger.warning(
                "reward_plugins: scorer worker %d %s between rows (attempt %d of %d for its "
                "rows); replaced",
                worker.pid,
                lost,
                chunk.attempt,
                MAX_ATTEMPTS,
            )
            if chunk.attempt >= MAX_ATTEMPTS:
                detail = f"crash: workers died {chunk.attempt} times while holding the row ({how})"
                for index in rows:
                    self._resolve(request, index, RowFailure(CRASH, detail))
                return
        request.retry.appendleft((rows, chunk.attempt + (blamed is None)))
        if request not in self._active:
            self._active.appendleft(request)

    def _expire(self) -> None:
        """Fail the unstarted rows of requests past their deadline; drop cancelled requests."""
        now = time.monotonic()
        for request in list(self._active):
            if request.cancelled:
                self._drop(request, request.unstarted())
            elif request.deadline is not None and now >= request.deadline:
                for index in request.unstarted():
                    self._resolve(request, index, deadline_failure())
            else:
                continue
            request.retry.clear()
            request.next_row = len(request.rows)
            self._active.remove(request)

    def _respawn(self) -> None:
        now = time.monotonic()
        due = [at for at in self._respawn_at if at <= now]
        if not due:
            return
        self._respawn_at = [at for at in self._respawn_at if at > now]
        for _ in due:
            try:
                self._workers.append(self._spawn())
            except OSError as error:  # e.g. out of processes: try again later
                logger.warning("reward_plugins: cannot start a scorer worker: %s", error)
                self._respawn_at.append(now + MAX_BACKOFF_SECONDS)

    def _chunk_rows(self) -> int:
        if self._seconds_per_row is None:
            return FIRST_CHUNK_ROWS
        fitting = int(TARGET_CHUNK_SECONDS / max(self._seconds_per_row, 1e-9))
        return max(1, min(MAX_CHUNK_ROWS, fitting))

    def _send(self) -> None:
        """Give each idle worker the next chunk, taking the requests round robin."""
        for worker in self._workers:
            if not self._active:
                return
            if not worker.ready or worker.chunk is not None or worker.retiring:
                continue
            request = self._active.popleft()
            if request.retry:
                rows, attempt = request.retry.popleft()
            else:
                stop = min(len(request.rows), request.next_row + self._chunk_rows())
                rows, attempt = list(range(request.next_row, stop)), 1
                request.next_row = stop
            if request.has_work():
                self._active.append(request)
            self._seq += 1
            chunk = Chunk(request, rows, attempt, self._seq)
            payload = self._payload(chunk)
            if not chunk.rows:
                continue
            with contextlib.suppress(OSError):  # it died: _bury sends the rows again
                worker.conn.send_bytes(payload)
            worker.chunk = chunk

    def _payload(self, chunk: Chunk) -> bytes:
        """The pickled chunk; a row that cannot be pickled fails alone (and leaves the chunk)."""
        request = chunk.request
        rows = [request.rows[i] for i in chunk.rows]
        items = [(r.data_source, r.solution_str, r.ground_truth, r.extra_info) for r in rows]
        message = (chunk.seq, request.options, request.deadline, items)
        try:
            return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            kept: list[int] = []
            for index, item in zip(list(chunk.rows), items, strict=True):
                try:
                    pickle.dumps(item)
                except Exception as error:
                    detail = f"scorer error: the row cannot be sent to a worker: {error}"
                    self._resolve(request, index, RowFailure("scorer error", detail))
                else:
                    kept.append(index)
            chunk.rows = kept
            return self._payload(chunk) if kept else b""

    def _stop_workers(self) -> None:
        stop_workers(self._workers)
        self._workers = []

    def _fail_everything(self, error: Exception) -> None:
        with self._lock:
            waiting, self._inbox = self._inbox, []
        held = [w.chunk.request for w in self._workers if w.chunk is not None]
        for request in [*self._active, *waiting, *held]:
            if not request.future.done():
                request.future.set_exception(error)
        self._active.clear()
