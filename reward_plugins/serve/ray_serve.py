"""Scale-out: the reward service as a Ray Serve deployment of N replicas.

The same app as ``reward-plugins serve-rewards``, on Ray Serve (docs.ray.io/en/latest/serve):
each replica builds its own :class:`~reward_plugins.runtime.pool.ScorerPool` (``workers`` scorer
processes) and :class:`~reward_plugins.serve.service.RewardService`, and answers every HTTP
request with ``await service.handle(Request(method, path, body))``, so every path, protocol and
error answer is the plain server's. Ray Serve's proxy spreads the requests over the replicas
(``ray/serve``: ``serve.start``, ``serve.deployment``, ``serve.run``).

What differs from the plain server is the HTTP layer: Ray Serve's proxy parses HTTP and holds the
connections, so ``read_timeout``, ``idle_timeout`` and ``max_connections`` are its own. The body
cap is applied here, from ``Content-Length`` and then while the body streams in; a replica takes
at most ``max_requests`` requests at once (Ray Serve's ``max_ongoing_requests``) and at most as
many more wait at each proxy (``max_queued_requests``), beyond which Ray Serve answers 503.
``GET /health`` adds the replica that answered (``replica``: its Ray Serve id and process id) to
the pool's counters.

Ray is imported only when a deployment is started: ``import reward_plugins.serve.ray_serve``
does not import it.

    with ray_reward_server(config, replicas=2, port=8000) as server:
        ...  # POST {server.base_url}/score
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import orjson

from reward_plugins.errors import RewardPluginsError
from reward_plugins.runtime.scoring import Outcome, Row

if TYPE_CHECKING:
    from reward_plugins.serve.service import ServiceConfig

__all__ = [
    "RayRewardServer",
    "RayServeError",
    "RewardReplica",
    "ray_reward_server",
    "run_on_ray_serve",
]

logger = logging.getLogger(__name__)

APP_NAME = "reward_plugins"
"""The Ray Serve application (and its one deployment) that serves the rewards."""

JSON = "application/json; charset=utf-8"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

SERVE_LOGGER = "ray.serve"
"""Ray Serve's logger in this process (``ray/serve/_private/constants.py``)."""

CONSTRUCTOR_TRIES = 2
"""Times Ray Serve builds a replica whose pool fails to start before ``serve.run`` fails (Ray
Serve's default, 20, would keep a bad configuration starting for minutes)."""


class RayServeError(RewardPluginsError, RuntimeError):
    """The deployment could not be started on Ray Serve (one line: the reason)."""


@dataclass(frozen=True)
class RayRewardServer:
    """A running deployment: where Ray Serve's proxy answers, and how many replicas serve."""

    base_url: str
    """``http://HOST:PORT``, as the plain server's ``base_url``."""
    replicas: int


class RewardReplica:
    """One Ray Serve replica: a scorer pool and the reward service answering through it.

    Built by Ray Serve in a replica process with the arguments given to :func:`_application`:
    the service's config and the pool's keyword arguments (``workers=0``: the service's
    in-process rows, no isolation, as ``serve-rewards --workers 0``). The pool is closed when Ray
    Serve stops the replica (``__del__``, Ray Serve's shutdown hook).
    """

    def __init__(self, config: ServiceConfig, pool_options: Mapping[str, Any]) -> None:
        from reward_plugins.serve.service import RewardService, scorer_rows

        self._max_body = int(config.limits.max_body_mb * 2**20)
        self._replica = _replica_id()
        self._pool, rows, stats = scorer_rows(config, **pool_options)
        if self._pool is not None:
            self._pool.start()
        self._service = RewardService(config, rows, stats=self._stats_of(stats))

    def _stats_of(self, stats: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
        """``stats`` (the pool's counters) with this replica's id and process id added."""
        replica = {"id": self._replica, "pid": os.getpid()}
        return lambda: {**stats(), "replica": replica}

    async def __call__(self, request: Any) -> Any:
        """Answer a Starlette ``request`` (what Ray Serve hands an ingress deployment)."""
        from starlette.responses import Response

        from reward_plugins.runtime.http import Refusal, Request

        try:
            body = await self._body(request)
            answer = await self._service.handle(Request(request.method, request.url.path, body))
        except Refusal as refusal:
            body = orjson.dumps({"error": str(refusal)})
            headers = dict(refusal.headers)
            return Response(body, status_code=int(refusal.status), headers=headers, media_type=JSON)
        return Response(answer, status_code=200, media_type=JSON)

    async def _body(self, request: Any) -> bytes:
        """The request's body, refused (413) as soon as it is known to be over the cap."""
        from reward_plugins.runtime.http import body_too_large

        limit = self._max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise body_too_large(limit, int(declared))
        parts: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise body_too_large(limit)
            parts.append(chunk)
        return b"".join(parts)

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)  # None: workers=0, or the pool did not start
        if pool is not None:
            pool.close()


def _replica_id() -> str:
    """This replica's Ray Serve id (``DEPLOYMENT#UNIQUE``), or the process id outside Serve."""
    from ray import serve

    try:
        return str(serve.get_replica_context().replica_id.to_full_id_str())
    except Exception:  # RayServeException outside a replica
        return f"pid-{os.getpid()}"


def _application(
    config: ServiceConfig,
    *,
    replicas: int,
    workers: int,
    row_timeout: float,
    max_worker_rss_mb: float,
) -> Any:
    """The bound Ray Serve application: ``replicas`` of :class:`RewardReplica`."""
    from ray import serve

    limits = config.limits
    deployment = serve.deployment(
        name=APP_NAME,
        num_replicas=replicas,
        ray_actor_options={"num_cpus": max(1, workers)},
        max_ongoing_requests=limits.max_requests,
        max_queued_requests=limits.max_requests,
        max_constructor_retry_count=CONSTRUCTOR_TRIES,
    )(RewardReplica)
    pool_options = {
        "workers": workers,
        "row_timeout": row_timeout,
        "max_worker_rss_mb": max_worker_rss_mb,
    }
    return deployment.bind(config, pool_options)


@contextlib.contextmanager
def ray_reward_server(
    config: ServiceConfig,
    *,
    replicas: int = 2,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    row_timeout: float = 10.0,
    max_worker_rss_mb: float = 2048.0,
    address: str | None = None,
    cpus: int | None = None,
    quiet: bool = True,
) -> Iterator[RayRewardServer]:
    """Run the reward service (a :class:`~reward_plugins.serve.service.ServiceConfig`) on Ray
    Serve for the ``with`` block; yield a :class:`RayRewardServer` (``.base_url``).

    Ray: this process's connection if it has one (left as it is on exit), else the cluster at
    ``address`` (``HOST:PORT``, ``ray://HOST:PORT``, ``auto``; default ``RAY_ADDRESS``) or a new
    local instance of ``cpus`` CPUs (default: what the replicas reserve) without the dashboard, as
    :func:`reward_plugins.runtime.ray_session.ray_session` connects (this checkout's package is
    shipped to the workers). Each of the ``replicas`` replicas reserves ``workers`` CPUs (at
    least one) for its scorer processes. The proxy listens on ``host:port`` (``0``: a port free
    on ``host`` when the call begins, as the yielded URL tells). The call returns
    once every replica has started its pool; on exit, ``serve.shutdown()`` stops the replicas
    and the proxy. With ``quiet``, Ray's and Ray Serve's own lines stay off this process's
    output (the replicas' logs stay in Ray's log files).

    The config is checked here first, as the plain server checks it (``UnknownScorer``,
    ``InvalidOption``, ... before Ray starts). Raises :class:`RayServeError` when Ray cannot be
    reached or the deployment fails to start
    (a replica's pool could not start, say), and ``ImportError`` when Ray Serve is not installed.
    """
    from ray import serve

    import reward_plugins
    from reward_plugins.runtime.ray_session import RayUnavailable, ray_session
    from reward_plugins.serve.service import RewardService

    RewardService(config, _no_rows)  # the config's errors, before Ray and the replicas start

    package = str(Path(reward_plugins.__file__).parent)
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(
                ray_session(
                    address,
                    cpus=cpus or replicas * max(1, workers),
                    quiet=quiet,
                    py_modules=[package],
                )
            )
        except RayUnavailable as error:
            raise RayServeError(str(error)) from None
        if quiet:  # Ray Serve's driver-side lines ("Started Serve", "is ready at")
            stack.enter_context(_logger_level(SERVE_LOGGER, logging.WARNING))
        app = _application(
            config,
            replicas=replicas,
            workers=workers,
            row_timeout=row_timeout,
            max_worker_rss_mb=max_worker_rss_mb,
        )
        stack.callback(serve.shutdown)
        port = port or _free_port(host)
        try:
            serve.start(http_options={"host": host, "port": port})
            serve.run(app, name=APP_NAME, route_prefix="/")
        except Exception as error:  # Ray Serve raises RuntimeError and its own exceptions
            reason = _reason(error)
            raise RayServeError(f"Ray Serve did not start the deployment: {reason}") from error
        shown = f"[{host}]" if ":" in host else host
        yield RayRewardServer(f"http://{shown}:{port}", replicas)


def run_on_ray_serve(
    config: ServiceConfig,
    *,
    ready: Callable[[RayRewardServer], None] | None = None,
    **settings: Any,
) -> None:
    """``serve-rewards --ray``: :func:`ray_reward_server` (``settings`` are its keywords) until
    SIGTERM or SIGINT, then ``serve.shutdown()``. ``ready(server)`` (a
    :class:`RayRewardServer`) is called once the replicas answer, as
    :func:`reward_plugins.runtime.http.serve_until_signal` calls it with the plain server. Must be
    called from the main thread: the two signal handlers are installed once Ray has started
    (Ray's driver installs its own SIGTERM handler, which would end the process at once), and
    taken away before Ray Serve and Ray are shut down."""
    with ray_reward_server(config, **settings) as server, _until_signal() as stop:
        logger.info(
            "serving rewards on Ray Serve at %s, %d replicas", server.base_url, server.replicas
        )
        if ready is not None:
            ready(server)
        while not stop.wait(0.5):
            pass


@contextlib.contextmanager
def _until_signal() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT during the block; the previous handlers (``SIG_DFL``
    for one not installed from Python) are put back on exit."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _free_port(host: str) -> int:
    """A TCP port free on ``host`` now (Ray Serve's proxy takes no port 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _logger_level(name: str, level: int) -> Iterator[None]:
    """The logger ``name`` at ``level`` for the block."""
    target = logging.getLogger(name)
    before = target.level
    target.setLevel(level)
    try:
        yield
    finally:
        target.setLevel(before)


async def _no_rows(
    rows: Sequence[Row], options: Mapping[str, Any], deadline: float | None
) -> list[Outcome]:
    raise AssertionError("the service built to check a config scores nothing")


def _reason(error: BaseException) -> str:
    """One line of a Ray error: the last line of its text, without terminal colours (a Ray
    task's error carries the remote traceback, the exception last)."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
