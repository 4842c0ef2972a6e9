"""A Ray connection for the ``ray`` backend that fails fast when Ray cannot be reached.

:func:`ray_session` connects this process to Ray (or starts a local instance) for the duration of
a ``with`` block. ``ray.init(address=...)`` alone does not fail fast: in Ray 2.60 a driver
connecting to a closed port or to a socket that never answers retries the GCS connection
``RAY_NUM_REDIS_GET_RETRIES`` (20) times, each attempt waiting out two 5 s gRPC connect windows
and a 30 s cluster-id request (about 40 s, some 13 minutes in all), and prints warning lines to
stderr on each attempt (``ray/_private/node.py``, ``Node._init_gcs_client``). A ``ray://``
address waits 30 s. So before calling ``ray.init``, the address is probed, all within
``timeout`` seconds:

1. TCP: the host name is resolved and a connection opened (``connection refused`` fails at once);
2. gRPC: the HTTP/2 connection preface is exchanged. Every gRPC server, Ray's GCS and Ray
   client server among them, answers a new connection with a ``SETTINGS`` frame (RFC 9113,
   section 3.4), so a socket that accepts connections and never answers, or a port that speaks
   another protocol, is told apart from Ray without any Ray code. Skipped when ``RAY_USE_TLS``
   is set (the greeting is then encrypted);
3. GCS (``HOST:PORT`` and ``auto``, not ``ray://``): with Ray's own functions, the two requests
   of ``ray.init`` that can wait long, given the time left: the cluster id, asked of the GCS
   (this tells a Ray GCS from another gRPC server, a ``ray://`` port given without the
   ``ray://`` say, and reports a missing or wrong authentication token at once), then the node
   of that cluster on this machine that the driver attaches to.

Ray's own timeouts are not shortened instead: they are C++ ``RayConfig`` values read from
``RAY_*`` environment variables when Ray first reads its configuration, so changing them in a
process that has already used Ray does not take effect, and changing them would leak into the
processes Ray starts.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from reward_plugins.errors import RewardPluginsError

__all__ = ["RayUnavailable", "ray_session"]

_QUIET_LOGGERS = ("ray", "ray.data")
"""Python loggers that write Ray's messages to this process's stderr."""

_FORMS = "give HOST:PORT, ray://HOST:PORT, auto or local"
"""The hint for an address of none of the forms :func:`ray_session` takes."""

_H2_CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_H2_EMPTY_SETTINGS = bytes([0, 0, 0, 0x4, 0, 0, 0, 0, 0])  # length 0, type SETTINGS, stream 0
_H2_FRAME_HEADER = 9
_H2_SETTINGS = 0x4


class RayUnavailable(RewardPluginsError, RuntimeError):
    """Ray cannot be reached at an address, or a local instance cannot be started.

    The message is one line: ``cannot reach Ray at HOST:PORT: <reason>; <hint>`` (or
    ``cannot start a local Ray instance: <reason>``).
    """


class _ProbeFailed(RewardPluginsError):
    """A probe step failed; the message is the reason, worded for :class:`RayUnavailable`.

    ``hint`` replaces the default advice at the end of the message.
    """

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.hint = hint


class _Deadline:
    """A point in time, ``seconds`` from now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds until the deadline, ``0.0`` once it has passed."""
        return max(0.0, self._end - time.monotonic())


@contextmanager
def ray_session(
    address: str | None,
    *,
    cpus: int | None,
    quiet: bool,
    timeout: float = 30.0,
    py_modules: list[str] | None = None,
) -> Iterator[None]:
    """Keep this process connected to Ray for the ``with`` block.

    If this process is already connected (``ray.is_initialized()``), that connection is used
    and left as it is on exit; ``address``, ``cpus``, ``timeout`` and ``py_modules`` are then
    ignored. Otherwise the target is ``address``, or the ``RAY_ADDRESS`` environment variable
    when ``address`` is ``None`` (or empty) or ``"auto"`` (as ``ray.init`` reads it):

    - ``None`` (and no ``RAY_ADDRESS``) or ``"local"``: a new local instance with ``cpus`` CPUs
      (all of them if ``None``) is started, without the dashboard;
    - ``HOST:PORT``: the GCS of a running cluster (``ray start --head``), as Ray dials it:
      ``localhost`` and ``127.0.0.1`` mean this machine's node IP address;
    - ``ray://HOST:PORT``: a Ray client server;
    - ``"auto"``: the cluster that ``ray start`` last started on this machine, or a running one;
    - another ``SCHEME://...`` is passed to ``ray.init`` unprobed.

    A ``HOST:PORT``, ``ray://HOST:PORT`` or ``"auto"`` target is probed first; if Ray does not
    answer there within ``timeout`` seconds, :class:`RayUnavailable` is raised (a closed port
    fails at once, a socket that accepts connections and never answers after ``timeout``). A
    ``ray.init`` failure is raised as :class:`RayUnavailable` too. The connection made here
    ships ``py_modules`` (paths of packages or modules) to the workers as a runtime
    environment when given, and is closed with ``ray.shutdown()`` on exit, also when the block
    raises (``KeyboardInterrupt`` included).

    With ``quiet=True`` Ray writes nothing to this process's stdout or stderr: for the block, the
    ``ray`` and ``ray.data`` loggers are set to ``ERROR`` and Ray Data's progress bars are
    turned off (``DataContext.enable_progress_bars``; both are restored on exit),
    ``ray.init`` gets ``logging_level=ERROR`` and ``log_to_driver=False`` (the workers' output
    stays in Ray's log files), and the C++ warnings of the GCS probe are discarded. Otherwise Ray's
    warnings and the workers' output are shown. This function itself never prints.

    ``ImportError`` is raised as is when Ray is not installed.
    """
    import ray
    import ray.exceptions

    with _ray_output_quieted(quiet) as quiet_again:
        if ray.is_initialized():
            yield
            return
        target = _target(address)
        init_kwargs = _init_kwargs(target, cpus=cpus, quiet=quiet, py_modules=py_modules)
        if target not in (None, "local"):
            _probe(target, _Deadline(timeout), quiet=quiet)
        try:
            try:
                ray.init(address=target or "local", **init_kwargs)
            except (OSError, RuntimeError, ValueError, ray.exceptions.RayError) as error:
                raise _unavailable(target, None, _first_line(error)) from error
            quiet_again()  # ray.init reconfigures the "ray" logger
            yield
        finally:
            ray.shutdown()


@contextmanager
def _ray_output_quieted(active: bool) -> Iterator[Callable[[], None]]:
    """Keep Ray's Python-side output off stdout and stderr for the block when ``active``.

    Sets the ``ray`` and ``ray.data`` loggers to ``ERROR`` and turns Ray Data's progress bars
    off, and restores both on exit. Yields a function that applies the settings again.
    """
    if not active:
        yield lambda: None
        return
    data_context: Any = None
    with suppress(ImportError):  # importing Ray Data resets its loggers: import it first
        import ray.data

        with warnings.catch_warnings():  # the first context warns of Ray's own deprecations
            warnings.simplefilter("ignore", DeprecationWarning)
            data_context = ray.data.DataContext.get_current()
    levels = {name: logging.getLogger(name).level for name in _QUIET_LOGGERS}
    progress_bars = data_context.enable_progress_bars if data_context is not None else None

    def apply() -> None:
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.ERROR)
        if data_context is not None:
            data_context.enable_progress_bars = False

    apply()
    try:
        yield apply
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if data_context is not None:
            data_context.enable_progress_bars = progress_bars


def _target(address: str | None) -> str | None:
    """``address``, or ``RAY_ADDRESS`` when set and ``address`` is ``None`` or ``"auto"``.

    The rule of ``ray.init`` (``ray/_private/worker.py``, ``init``); an empty string is ``None``.
    """
    address = address or None
    from_environment = os.environ.get("RAY_ADDRESS") or None
    if from_environment and address in (None, "auto"):
        return from_environment
    return address


def _init_kwargs(
    target: str | None, *, cpus: int | None, quiet: bool, py_modules: list[str] | None
) -> dict[str, Any]:
    """The keyword arguments of ``ray.init`` for ``target``, besides the address."""
    kwargs: dict[str, Any] = {}
    if py_modules is not None:
        kwargs["runtime_env"] = {"py_modules": list(py_modules)}
    # Ray client sets up this process's "ray" logger with logging_level too, and forwards both
    # to ray.init on the server (ray/_private/worker.py, init).
    kwargs["logging_level"] = logging.ERROR if quiet else logging.WARNING
    kwargs["log_to_driver"] = not quiet
    if target in (None, "local"):
        kwargs["num_cpus"] = cpus
        kwargs["include_dashboard"] = False
    return kwargs


# --------------------------------------------------------------------------------- the probes


def _probe(target: str, deadline: _Deadline, *, quiet: bool) -> None:
    """Raise :class:`RayUnavailable` unless Ray answers at ``target`` before ``deadline``."""
    scheme, separator, rest = target.partition("://")
    if separator:
        if scheme != "ray":
            return  # another client builder module: Ray resolves and connects it
        try:
            host, port = _split(rest)
            _probe_grpc(host, port, deadline)
        except _ProbeFailed as failure:
            raise _unavailable(target, None, str(failure), failure.hint, client=True) from None
        return
    dialled = _bootstrap_address(target)
    try:
        host, port = _split(dialled)
        _probe_grpc(host, port, deadline)
        _probe_gcs(dialled, deadline, quiet=quiet, auto=target == "auto")
    except _ProbeFailed as failure:
        raise _unavailable(target, dialled, str(failure), failure.hint) from None


def _bootstrap_address(target: str) -> str:
    """The ``HOST:PORT`` that ``ray.init(address=target)`` dials.

    Ray's own resolution (``ray/_private/services.py``, ``canonicalize_bootstrap_address``,
    called by ``ray.init``): ``localhost``, ``127.0.0.1`` and ``::1`` become this machine's node
    IP address, ``"auto"`` the cluster found on this machine.
    """
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # a Ray without it: dial the address as given
        return target
    try:
        dialled = canonicalize_bootstrap_address(target)
    except ValueError as error:
        raise _unavailable(target, None, _first_line(error), _FORMS) from None
    except OSError as error:  # ConnectionError: "auto" found no cluster
        raise _unavailable(target, None, _first_sentence(_first_line(error))) from None
    if dialled is None:  # "local" spelled another way: nothing to probe
        return target
    return str(dialled)


def _split(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[IPV6]:PORT``) as its host and port."""
    host, separator, port = address.rpartition(":")
    if not separator or not host or not port.isdigit():
        raise _ProbeFailed("not a HOST:PORT address", _FORMS)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _probe_grpc(host: str, port: int, deadline: _Deadline) -> None:
    """Open a TCP connection to ``host:port`` and exchange HTTP/2 greetings before ``deadline``."""
    with _connect(host, port, deadline) as connection:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return  # TLS first: the HTTP/2 greeting is encrypted (ray/_private/grpc_utils.py)
        connection.settimeout(max(deadline.left(), 0.001))
        header = b""
        try:
            connection.sendall(_H2_CLIENT_PREFACE + _H2_EMPTY_SETTINGS)
            while len(header) < _H2_FRAME_HEADER:
                connection.settimeout(max(deadline.left(), 0.001))
                chunk = connection.recv(_H2_FRAME_HEADER - len(header))
                if not chunk:
                    raise _ProbeFailed("the server closed the connection without a gRPC greeting")
                header += chunk
        except TimeoutError:
            raise _ProbeFailed(
                f"the port accepts connections but sent no gRPC greeting within "
                f"{deadline.seconds:g} s"
            ) from None
        except OSError as error:
            raise _ProbeFailed(_os_reason(error)) from None
        if header[3] != _H2_SETTINGS:
            raise _ProbeFailed("the server there does not speak gRPC")


def _connect(host: str, port: int, deadline: _Deadline) -> socket.socket:
    """A TCP connection to ``host:port``, opened before ``deadline``."""
    last: _ProbeFailed | None = None
    for family, kind, protocol, _, sockaddr in _resolve(host, port, deadline):
        connection = socket.socket(family, kind, protocol)
        try:
            connection.settimeout(max(deadline.left(), 0.001))
            connection.connect(sockaddr)
        except TimeoutError:
            connection.close()
            last = _ProbeFailed(f"no TCP connection within {deadline.seconds:g} s")
        except OSError as error:
            connection.close()
            last = _ProbeFailed(_os_reason(error))
        else:
            return connection
        if deadline.left() <= 0:
            break
    raise last or _ProbeFailed(f"no address found for {host}")


def _resolve(host: str, port: int, deadline: _Deadline) -> list[Any]:
    """``socket.getaddrinfo`` for a TCP connection, answered before ``deadline``.

    A numeric host is resolved at once. A name is looked up in a daemon thread, since
    ``getaddrinfo`` has no timeout: if the lookup is still running at the deadline, the thread
    is left to finish on its own, and does not keep the interpreter from exiting.
    """
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass
    answers: list[Any] = []
    errors: list[OSError] = []

    def look_up() -> None:
        try:
            answers.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            errors.append(error)

    lookup = threading.Thread(target=look_up, name=f"resolve {host}", daemon=True)
    lookup.start()
    lookup.join(deadline.left())
    if lookup.is_alive():
        raise _ProbeFailed(f"no answer from DNS for {host} within {deadline.seconds:g} s")
    if errors:
        raise _ProbeFailed(f"cannot resolve {host} ({_os_reason(errors[0])})")
    return answers


def _probe_gcs(address: str, deadline: _Deadline, *, quiet: bool, auto: bool) -> None:
    """Check, before ``deadline``, the two requests of ``ray.init`` that can wait for minutes.

    1. The cluster id, asked of the GCS at ``address`` by Ray's GCS client
       (``ray._raylet.InnerGcsClient.standalone``, in Ray's ``python/ray/includes/
       gcs_client.pxi``; ``ray.init`` makes the same client in ``Node._init_gcs_client``,
       ``ray/_private/node.py``, and retries it 20 times). A rejected authentication token
       fails here, except for ``"auto"``, for which ``ray.init`` loads a local token first
       (``maybe_enable_token_auth_if_token_available`` in
       ``ray/_private/authentication/authentication_token_setup.py``).
    2. A node of that cluster on this machine, for the driver to attach to: a ``HOST:PORT``
       driver runs on a cluster node. The same lookup as ``ray.init``
       (``get_node_to_connect_for_driver`` in ``ray/_private/services.py``, which otherwise
       waits 60 s), given the time left.

    Either step is skipped on a Ray without the function it uses.
    """
    import ray._raylet
    import ray.exceptions

    standalone = getattr(getattr(ray._raylet, "InnerGcsClient", None), "standalone", None)
    if standalone is None:
        return
    rejected = getattr(ray.exceptions, "AuthenticationError", None)
    with _native_stderr_discarded(quiet):
        try:
            client = standalone(address, None, max(1, int(deadline.left() * 1000)))
        except Exception as error:  # Ray raises RpcError, AuthenticationError, TimeoutError, ...
            reason = _first_line(error)
            if rejected is not None and isinstance(error, rejected):
                if auto:
                    return
                raise _ProbeFailed(
                    f"Ray refused the connection ({_first_sentence(reason)})",
                    "set RAY_AUTH_MODE=token and give the cluster's token "
                    "(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)",
                ) from None
            if "method not found" in reason.lower() or "unimplemented" in reason.lower():
                reason = f"the gRPC server there is not a Ray GCS ({reason})"
            raise _ProbeFailed(reason) from None
        try:
            from ray._private.services import get_node_to_connect_for_driver
        except ImportError:
            return
        try:
            # Its loop compares the seconds as a float, but they are annotated as an int.
            get_node_to_connect_for_driver(client, timeout_seconds=max(1, round(deadline.left())))
        except Exception as error:  # RuntimeError when no node is found
            raise _ProbeFailed(
                f"no node of that cluster runs on this machine ({_first_line(error)})",
                "a HOST:PORT address works on the cluster's nodes; "
                "from elsewhere use ray://HOST:10001 (Ray client)",
            ) from None


@contextmanager
def _native_stderr_discarded(active: bool) -> Iterator[None]:
    """Send file descriptor 2 to the null device for the block when ``active``.

    Ray's C++ code logs its GCS client's warnings to file descriptor 2, out of reach of
    Python's ``logging`` and ``sys.stderr``.
    """
    if not active:
        yield
        return
    with suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


# ------------------------------------------------------------------------------- the messages


def _unavailable(
    target: str | None,
    dialled: str | None,
    reason: str,
    hint: str | None = None,
    *,
    client: bool = False,
) -> RayUnavailable:
    """The :class:`RayUnavailable` for ``target`` (``None``: a local instance)."""
    if target in (None, "local"):
        return RayUnavailable(f"cannot start a local Ray instance: {reason}")
    where = target if dialled in (None, target) else f"{target} (dialled as {dialled})"
    if hint is None and client:
        hint = "is a Ray client server (ray start --head) listening there?"
    elif hint is None:
        hint = "is a Ray head node (ray start --head) running there?"
    return RayUnavailable(f"cannot reach Ray at {where}: {reason}; {hint}")


def _first_line(error: BaseException) -> str:
    """The first non-empty line of ``error``'s message, or its type's name."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip().rstrip(".")
    return type(error).__name__


def _first_sentence(text: str) -> str:
    """``text`` up to its first full stop."""
    head, _, _ = text.partition(". ")
    return head.rstrip(".")


def _os_reason(error: OSError) -> str:
    """``connection refused`` and the like, from an ``OSError``."""
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    return (error.strerror or str(error) or type(error).__name__).lower()
