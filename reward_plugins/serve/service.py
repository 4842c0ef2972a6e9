"""The reward server's routing: one :class:`RewardService` answers every path, whatever runs it
(:class:`~reward_plugins.runtime.http.HttpServer`, or a Ray Serve deployment).

Paths: ``POST /score`` (native), ``POST /get_reward`` (OpenRLHF), ``POST /verify``
(NeMo-Gym, with the resources-server paths its agents also call: ``/seed_session``,
``/close_session``, ``/aggregate_metrics``), each shaped by
:mod:`reward_plugins.serve.protocols`; ``GET /health`` (status, the
pool's stats, the counters, the limits) and ``GET /scorers`` (the served scorer, its options,
its result schema, and every registered scorer name). Another method on a known path is 405
(with ``Allow``), an unknown path 404; every refusal is a one-line ``{"error": ...}``.

What every scoring request gets:

- a deadline, ``request_timeout`` seconds from its arrival, handed to the pool (rows not started
  by then fail as ``deadline``); a pool that has not answered ``DEADLINE_GRACE`` seconds after
  it is answered 503 with ``Retry-After``;
- a pool with no room (:class:`~reward_plugins.runtime.pool.Overloaded`): 503 with
  ``Retry-After``;
- fixed keys: the result keys are the union of ``router.result_schema(scorer, data_source,
  options)`` over the request's data sources (every registration of the scorer when none is
  known); a scored row's dict is the scorer's own, exactly as in-process ``route`` returns it;
  a failed row's dict holds every key at 0.0 but ``score``, which is ``fallback_reward``;
- a native request's ``options`` laid over the server's and checked
  (``router.check_options``): an invalid one is a 400 naming it, nothing is scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson

from reward_plugins.errors import (
    InvalidInput,
    InvalidOption,
    PluginError,
    RewardPluginsError,
    UnknownDataSource,
)
from reward_plugins.options import is_finite_number
from reward_plugins.registry import scorer_names
from reward_plugins.results import Schema, keys_of, union
from reward_plugins.router import check_options, result_schema, scorer_result_schema
from reward_plugins.runtime.http import (
    HttpServer,
    Refusal,
    Request,
    check_limits,
    limit,
    overloaded,
    running_in_thread,
)
from reward_plugins.runtime.openrlhf_text import default_data_source
from reward_plugins.runtime.pool import Overloaded, ScorerPool
from reward_plugins.runtime.rows import RowFailure
from reward_plugins.runtime.scoring import DEADLINE, Outcome, Row, ScoreRows, score_one
from reward_plugins.serve import protocols

logger = logging.getLogger(__name__)

SCORE_PATH = "/score"
OPENRLHF_PATH = "/get_reward"
NEMO_PATH = "/verify"
HEALTH_PATH = "/health"
SCORERS_PATH = "/scorers"
NEMO_SESSION_PATHS = ("/seed_session", "/close_session")
NEMO_METRICS_PATH = "/aggregate_metrics"
METHODS: Mapping[str, str] = {
    SCORE_PATH: "POST",
    OPENRLHF_PATH: "POST",
    NEMO_PATH: "POST",
    **dict.fromkeys(NEMO_SESSION_PATHS, "POST"),
    NEMO_METRICS_PATH: "POST",
    HEALTH_PATH: "GET",
    SCORERS_PATH: "GET",
}
"""Each path and the one method it answers."""

DEADLINE_GRACE = 5.0
"""Seconds past a request's deadline that the pool may take to answer (rows already running
finish or time out) before the request is answered 503."""


@dataclass(frozen=True)
class ServiceLimits:
    """What one reward server accepts and holds; every field is a ``serve-rewards`` option
    (``max_rows`` is ``--max-rows``), its help in the field's ``metadata``."""

    max_body_mb: float = limit(64.0, "largest request body in MiB; 413 beyond")
    read_timeout: float = limit(
        30.0, "seconds a request's headers and body may take to arrive, and its answer to leave"
    )
    idle_timeout: float = limit(60.0, "seconds a keep-alive connection may wait idle")
    max_connections: int = limit(1024, "most open connections; 503 beyond")
    max_requests: int = limit(256, "most requests being answered at once; 503 beyond")
    max_rows: int = limit(16384, "most rows in one request; 413 beyond")
    max_string_chars: int = limit(
        1_048_576, "longest string of a request (a response, a query, a gold), in characters"
    )
    max_response_mb: float = limit(64.0, "largest response body in MiB; 413 beyond")
    request_timeout: float = limit(
        150.0,
        "seconds a request's rows may wait to be scored (rows not started by then fail as "
        "'deadline'); below OpenRLHF's 180 s client timeout",
    )

    def __post_init__(self) -> None:
        check_limits(self)


@dataclass(frozen=True)
class ServiceConfig:
    """What a reward server serves.

    Attributes:
        scorer: the registered scorer name.
        options: the scorer's options (``--set``); a native request's options are laid over.
        data_source: rows naming none get it (``--data-source``); OpenRLHF labels and NeMo-Gym
            requests naming none get the scorer's first registered data source without it.
        fallback_reward: the reward of a failed row.
        limits: the caps.
        scores_key: the result key OpenRLHF's ``scores`` are read from; ``None``: ``acc`` when
            the scorer's result schema declares it, else the reward clipped to [0, 1].
    """

    scorer: str
    options: Mapping[str, Any] = field(default_factory=dict)
    data_source: str | None = None
    fallback_reward: float = 0.0
    limits: ServiceLimits = ServiceLimits()
    scores_key: str | None = None


class InProcessRows:
    """A :data:`~reward_plugins.runtime.scoring.ScoreRows` scoring in this process, in one daemon
    thread per request (``workers=0``): no isolation, a scorer that hangs holds its thread
    (the server still stops: the thread is not waited for) and one that crashes takes the
    server down; rows not started by the deadline fail as ``deadline``."""

    def __init__(self, scorer: str) -> None:
        self.scorer = scorer
        self.rows = 0
        self.failures: Counter[str] = Counter()

    async def __call__(
        self, rows: Sequence[Row], options: Mapping[str, Any], deadline: float | None = None
    ) -> list[Outcome]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[Outcome]] = loop.create_future()

        def settle(outcomes: list[Outcome] | None, error: BaseException | None) -> None:
            if answer.done():  # the request was cancelled meanwhile
                return
            if error is not None:
                answer.set_exception(error)
            else:
                answer.set_result(outcomes or [])

        def run() -> None:
            try:
                outcomes, error = self._score(rows, options, deadline), None
            except BaseException as raised:  # handed to the request, raised there
                outcomes, error = None, raised
            with contextlib.suppress(RuntimeError):  # the loop closed: the server stopped
                loop.call_soon_threadsafe(settle, outcomes, error)

        # not asyncio.to_thread: its executor is joined when the loop ends, so a hung row
        # would keep a stopped server from exiting
        threading.Thread(target=run, name="reward-plugins-in-process", daemon=True).start()
        outcomes = await answer
        self.rows += len(outcomes)
        self.failures.update(o.reason for o in outcomes if isinstance(o, RowFailure))
        return outcomes

    def _score(
        self, rows: Sequence[Row], options: Mapping[str, Any], deadline: float | None
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for row in rows:
            if deadline is not None and time.monotonic() > deadline:
                outcomes.append(RowFailure(DEADLINE, "deadline: the request's time ran out"))
                continue
            outcomes.append(
                score_one(
                    self.scorer,
                    options,
                    row.data_source,
                    row.solution_str,
                    row.ground_truth,
                    row.extra_info,
                )
            )
        return outcomes

    def stats(self) -> dict[str, Any]:
        """For ``GET /health``: the mode, rows scored, failures by kind."""
        failures = dict(self.failures)
        return {"workers": 0, "isolation": False, "rows": self.rows, "failures": failures}


class RewardService:
    """Routes every request to its protocol and scores its rows with ``score_rows``.

    Raises (when built):
        UnknownScorer, UnknownDataSource, InvalidOption: the config's scorer, data source or
            options are not valid (checked as ``router.check_options`` does).
        InvalidInput: ``fallback_reward`` is not a finite number, or ``scores_key`` is not a
            result key of the scorer.
    """

    def __init__(
        self,
        config: ServiceConfig,
        score_rows: ScoreRows,
        stats: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        check_options(config.scorer, config.data_source, config.options)
        if not is_finite_number(config.fallback_reward):
            raise InvalidInput(
                f"fallback_reward: expected a finite number, got {config.fallback_reward!r} "
                f"({type(config.fallback_reward).__name__})"
            )
        schema = scorer_result_schema(config.scorer, config.options)
        if config.scores_key is not None and config.scores_key not in keys_of(schema):
            raise InvalidInput(
                f"scores_key: {config.scores_key!r} is not a result key of {config.scorer}; "
                f"its keys are {', '.join(keys_of(schema))}"
            )
        self.config = config
        self.score_rows = score_rows
        self.stats = stats
        self.default_source = config.data_source or default_data_source(config.scorer)
        self.options: dict[str, Any] = dict(config.options)
        self.requests: Counter[str] = Counter()
        self.refused: Counter[int] = Counter()
        self.rows = 0
        self.failures: Counter[str] = Counter()

    async def handle(self, request: Request) -> bytes:
        """Answer one request: a 200 JSON body, or :class:`~reward_plugins.runtime.http.Refusal`."""
        try:
            return await self._route(request)
        except Refusal as refusal:
            self.refused[refusal.status] += 1
            raise

    async def _route(self, request: Request) -> bytes:
        method = METHODS.get(request.path)
        if method is None:
            raise Refusal(HTTPStatus.NOT_FOUND, f"no such path: {request.path[:200]}")
        if request.method != method:
            raise Refusal(
                HTTPStatus.METHOD_NOT_ALLOWED,
                f"{request.path}: use {method}",
                [("Allow", method)],
            )
        self.requests[request.path] += 1
        limits = self.config.limits
        if request.path == SCORE_PATH:
            batch = protocols.parse_native(request.body, limits, self.config.data_source)
            options = {**self.options, **batch.options}
            scored = await self._score(batch.rows, options, check=bool(batch.options))
            return protocols.native_answer(scored, limits)
        if request.path == OPENRLHF_PATH:
            batch = protocols.parse_openrlhf(request.body, limits, self.default_source)
            scored = await self._score(batch.rows, self.options)
            return protocols.openrlhf_answer(scored, limits, self.config.scores_key)
        if request.path == NEMO_PATH:
            verify = protocols.parse_nemo(request.body, limits, self.default_source)
            scored = await self._score([verify.row], self.options)
            return protocols.nemo_answer(verify, scored, limits)
        if request.path in NEMO_SESSION_PATHS:
            return protocols.nemo_session(request.body)
        if request.path == NEMO_METRICS_PATH:
            return protocols.nemo_aggregate_metrics(request.body)
        if request.path == HEALTH_PATH:
            return orjson.dumps(self.health())
        return orjson.dumps(self.scorers())

    async def _score(
        self, rows: Sequence[Row | RowFailure], options: dict[str, Any], check: bool = False
    ) -> protocols.Scored:
        """Score the rows that are :class:`Row`; the others are failures already."""
        to_score = [row for row in rows if isinstance(row, Row)]
        keys = self._keys({row.data_source for row in to_score}, options, check)
        deadline = time.monotonic() + self.config.limits.request_timeout
        outcomes: list[Outcome] = []
        if to_score:
            outcomes = await self._await_pool(to_score, options, deadline)
        scored = iter(outcomes)
        merged = [next(scored) if isinstance(row, Row) else row for row in rows]
        self._count(merged)
        return protocols.Scored(keys, merged, float(self.config.fallback_reward))

    async def _await_pool(
        self, rows: list[Row], options: dict[str, Any], deadline: float
    ) -> list[Outcome]:
        timeout = self.config.limits.request_timeout + DEADLINE_GRACE
        try:
            outcomes = await asyncio.wait_for(self.score_rows(rows, options, deadline), timeout)
        except Overloaded as error:
            raise overloaded(f"the scorer pool is full: {error}") from None
        except asyncio.TimeoutError:
            raise overloaded(
                f"the rows were not scored within {timeout:g} s (--request-timeout)"
            ) from None
        if len(outcomes) != len(rows):  # a broken ScoreRows: never answer misaligned rows
            raise Refusal(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                f"the pool answered {len(outcomes)} outcomes for {len(rows)} rows",
            )
        return outcomes

    def _keys(self, sources: set[str], options: dict[str, Any], check: bool) -> tuple[str, ...]:
        """The result keys of the rows' data sources with ``options`` (checked first when a
        request brought options of its own)."""
        try:
            if check:
                check_options(self.config.scorer, None, options)
            schemas: list[Schema] = []
            for source in sorted(sources):
                with contextlib.suppress(UnknownDataSource):  # the row fails when scored
                    schemas.append(result_schema(self.config.scorer, source, options))
            if not schemas:
                schemas.append(scorer_result_schema(self.config.scorer, options))
        except InvalidOption as error:
            raise Refusal(HTTPStatus.BAD_REQUEST, f"'options': {error}") from None
        except PluginError as error:
            raise Refusal(HTTPStatus.INTERNAL_SERVER_ERROR, str(error)) from None
        except (RewardPluginsError, TypeError, ValueError) as error:
            raise Refusal(HTTPStatus.BAD_REQUEST, f"'options': {error}") from None
        return keys_of(union(schemas))

    def _count(self, outcomes: Sequence[Outcome]) -> None:
        failed = Counter(o.reason for o in outcomes if isinstance(o, RowFailure))
        self.rows += len(outcomes)
        self.failures.update(failed)
        if failed:
            kinds = ", ".join(f"{kind}: {count}" for kind, count in sorted(failed.items()))
            logger.warning("%d of %d rows failed (%s)", failed.total(), len(outcomes), kinds)

    def health(self) -> dict[str, Any]:
        """``GET /health``: status, scorer, the pool's stats, the counters and the limits."""
        return {
            "status": "ok",
            "scorer": self.config.scorer,
            "pool": self.stats() if self.stats is not None else None,
            "requests": dict(self.requests),
            "refused": {str(status): n for status, n in self.refused.items()},
            "rows": self.rows,
            "failures": dict(self.failures),
            "limits": dataclasses.asdict(self.config.limits),
        }

    def scorers(self) -> dict[str, Any]:
        """``GET /scorers``: the served scorer, its options, data source, fallback reward,
        result schema (key, kind, label), and every registered scorer name."""
        schema = scorer_result_schema(self.config.scorer, self.options)
        return {
            "scorer": self.config.scorer,
            "data_source": self.default_source,
            "options": self.options,
            "fallback_reward": self.config.fallback_reward,
            "results": [
                {"key": item.key, "kind": item.kind, "label": item.label} for item in schema
            ],
            "scorers": sorted(scorer_names()),
        }


def scorer_rows(
    config: ServiceConfig,
    *,
    workers: int = 1,
    row_timeout: float = 10.0,
    max_worker_rss_mb: float = 2048.0,
) -> tuple[ScorerPool | None, ScoreRows, Callable[[], dict[str, Any]]]:
    """What scores a server's rows: ``(pool, score_rows, stats)``, a
    :class:`~reward_plugins.runtime.pool.ScorerPool` of ``workers`` processes (not started yet),
    or for ``workers=0`` no pool and :class:`InProcessRows` (no isolation)."""
    if workers == 0:
        in_process = InProcessRows(config.scorer)
        return None, in_process, in_process.stats
    pool = ScorerPool(
        config.scorer, workers=workers, row_timeout=row_timeout, max_worker_rss_mb=max_worker_rss_mb
    )
    return pool, pool.score, pool.stats


class RewardServer:
    """A whole reward server: the scorer pool, a :class:`RewardService` and its
    :class:`~reward_plugins.runtime.http.HttpServer`; :meth:`start` and :meth:`close` as the HTTP
    server's, so :func:`~reward_plugins.runtime.http.serve_until_signal` and
    :func:`~reward_plugins.runtime.http.running_in_thread` run it.

    ``workers`` processes score the rows (:class:`~reward_plugins.runtime.pool.ScorerPool`, each
    row within ``row_timeout`` s, a worker over ``max_worker_rss_mb`` recycled); ``workers=0``
    scores in this process (:class:`InProcessRows`: no isolation).

    Raises (when built): what :class:`RewardService` raises for a wrong config, and
    ``PoolError`` for wrong pool settings.
    """

    def __init__(
        self,
        config: ServiceConfig,
        *,
        workers: int = 1,
        row_timeout: float = 10.0,
        max_worker_rss_mb: float = 2048.0,
    ) -> None:
        self.pool, score_rows, stats = scorer_rows(
            config, workers=workers, row_timeout=row_timeout, max_worker_rss_mb=max_worker_rss_mb
        )
        self.service = RewardService(config, score_rows, stats)
        self.http = HttpServer(self.service.handle, config.limits, logger)

    async def start(self, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Start the workers (warmed), then bind ``host:port`` (0: a free port)."""
        if self.pool is not None:
            await asyncio.to_thread(self.pool.start)
        try:
            await self.http.start(host, port)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the connections, then stop the workers (none is left running)."""
        await self.http.close()
        if self.pool is not None:
            await asyncio.to_thread(self.pool.close)

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``."""
        return self.http.base_url


@contextlib.contextmanager
def running_reward_server(
    scorer: str = "compute_score",
    *,
    options: Mapping[str, Any] | None = None,
    data_source: str | None = None,
    workers: int = 1,
    row_timeout: float = 10.0,
    fallback_reward: float = 0.0,
    scores_key: str | None = None,
    **limits: Any,
) -> Iterator[RewardServer]:
    """A :class:`RewardServer` on ``127.0.0.1`` (a free port) in a background thread for the
    block, then closed; ``limits`` are :class:`ServiceLimits` fields. Yields the server
    (``.base_url``)."""
    config = ServiceConfig(
        scorer,
        dict(options or {}),
        data_source,
        fallback_reward,
        ServiceLimits(**limits),
        scores_key,
    )
    server = RewardServer(config, workers=workers, row_timeout=row_timeout)
    with running_in_thread(server) as running:
        yield running
