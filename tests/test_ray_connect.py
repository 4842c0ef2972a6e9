"""``ray_session``: fast failures on unreachable addresses, quiet sessions, connection reuse.

Real Ray on loopback, nothing mocked. A Ray instance for the module runs in a child process
(started at once, so that it boots while the failure tests run); this process connects to Ray
only inside a test, and disconnects before it ends, since ``ray_session`` reuses a connection
this process already has. The local start runs in a subprocess of its own.

Ray dials ``127.0.0.1`` and ``localhost`` as this machine's node IP address, so a listening
socket on ``127.0.0.1`` is refused there; the silent socket that Ray itself would dial listens
on ``127.0.0.2``, another loopback address, which Ray dials as given.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
import ray
import ray.data  # imported here, not in the timed sessions

from reward_plugins.runtime.ray_session import RayUnavailable, ray_session

REPO = Path(__file__).resolve().parents[1]

_CLUSTER = textwrap.dedent(
    """
    import logging, sys
    import ray
    ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.ERROR)
    print(ray.get_runtime_context().gcs_address, flush=True)
    sys.stdin.read()  # until the test closes the pipe
    """
)

_SESSION = textwrap.dedent(
    """
    import json, sys
    import ray
    from reward_plugins.runtime.ray_session import ray_session

    address = sys.argv[1] or None
    package = sys.argv[2]

    @ray.remote
    def task():
        print("worker stdout")
        print("worker stderr", file=sys.stderr)
        return ray.get_runtime_context().runtime_env.get("py_modules") or []

    report = {}
    with ray_session(address, cpus=1, quiet=True, py_modules=[package]):
        report["cpus"] = ray.cluster_resources().get("CPU")
        report["py_modules"] = ray.get(task.remote())
    report["after"] = ray.is_initialized()
    if address:
        try:
            with ray_session(address, cpus=1, quiet=True):
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            report["after_interrupt"] = ray.is_initialized()
    print(json.dumps(report))
    """
)


def _environment(**changes: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
    )
    return {**environment, **changes}


class _Cluster:
    """A Ray instance in a child process, its GCS address read when first needed."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CLUSTER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            # without token authentication, so that any process here may connect
            env=_environment(RAY_AUTH_MODE="disabled"),
        )
        self._address: str | None = None

    def port(self) -> int:
        if self._address is None:
            assert self.process.stdout is not None
            ready, _, _ = select.select([self.process.stdout], [], [], 120)
            line = self.process.stdout.readline().strip() if ready else ""
            assert line, "the Ray instance for this module did not start"
            self._address = line
        return int(self._address.rpartition(":")[2])

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # the child shuts Ray down and exits
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[_Cluster]:
    started = _Cluster()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(autouse=True)
def _not_connected() -> Iterator[None]:
    """Each test starts and ends with this process not connected to Ray."""
    assert not ray.is_initialized()
    yield
    assert not ray.is_initialized()


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def loopback() -> str:
    """A loopback address that Ray dials as given (it dials 127.0.0.1 as the node's address)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.2", 0))
        except OSError:
            pytest.skip("127.0.0.2 is not a loopback address here")
    return "127.0.0.2"


@pytest.fixture
def silent_port(loopback: str) -> Iterator[tuple[str, int]]:
    """A socket that accepts connections and never answers: its host and port."""
    listener = socket.socket()
    listener.bind((loopback, 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def hold() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:  # the listener was closed
                return

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        yield loopback, int(listener.getsockname()[1])
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept on Linux
        listener.close()
        holder.join(timeout=1)
        for connection in held:
            connection.close()


def _fails(address: str, timeout: float) -> tuple[str, float]:
    """The message of the ``RayUnavailable`` for ``address``, and the seconds it took."""
    start = time.monotonic()
    with (
        pytest.raises(RayUnavailable) as raised,
        ray_session(address, cpus=1, quiet=True, timeout=timeout),
    ):
        pytest.fail("entered a Ray session")
    return str(raised.value), time.monotonic() - start


# ------------------------------------------------------------------------------ the failures


def test_closed_port_fails_at_once() -> None:
    address = f"127.0.0.1:{_free_port()}"
    message, elapsed = _fails(address, timeout=10)
    assert elapsed < 2
    assert message.startswith(f"cannot reach Ray at {address}")
    assert "connection refused" in message
    assert "\n" not in message


def test_closed_port_of_a_ray_client_fails_at_once() -> None:
    address = f"ray://127.0.0.1:{_free_port()}"
    message, elapsed = _fails(address, timeout=10)
    assert elapsed < 2
    assert message.startswith(f"cannot reach Ray at {address}: connection refused")


def test_listener_on_127_0_0_1_is_not_what_ray_dials() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        message, elapsed = _fails(address, timeout=10)
    assert elapsed < 15
    assert message.startswith(f"cannot reach Ray at {address}")


def test_silent_socket_fails_within_the_timeout(silent_port: tuple[str, int]) -> None:
    host, port = silent_port
    message, elapsed = _fails(f"{host}:{port}", timeout=10)
    assert 9 < elapsed < 15
    assert message.startswith(f"cannot reach Ray at {host}:{port}: ")
    assert "no gRPC greeting within 10 s" in message


def test_silent_socket_of_a_ray_client_fails_within_the_timeout(
    silent_port: tuple[str, int],
) -> None:
    host, port = silent_port
    message, elapsed = _fails(f"ray://{host}:{port}", timeout=2)
    assert 1.5 < elapsed < 5
    assert message.startswith(f"cannot reach Ray at ray://{host}:{port}: ")


def test_a_port_that_does_not_speak_grpc_fails_at_once(loopback: str) -> None:
    with socket.socket() as listener:
        listener.bind((loopback, 0))
        listener.listen(1)
        address = f"{loopback}:{listener.getsockname()[1]}"

        def answer() -> None:  # as an HTTP/1 server answers an HTTP/2 greeting
            connection, _ = listener.accept()
            with connection:
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer, daemon=True).start()
        message, elapsed = _fails(address, timeout=10)
    assert elapsed < 2
    assert message.startswith(f"cannot reach Ray at {address}: ")
    assert "does not speak gRPC" in message


def test_a_grpc_server_that_is_not_a_gcs_fails_at_once(loopback: str) -> None:
    server = grpc.server(ThreadPoolExecutor(max_workers=1))  # no services at all
    port = server.add_insecure_port(f"{loopback}:0")
    server.start()
    try:
        message, elapsed = _fails(f"{loopback}:{port}", timeout=10)
    finally:
        server.stop(grace=None)
    assert elapsed < 2
    assert message.startswith(f"cannot reach Ray at {loopback}:{port}: ")
    assert "not a Ray GCS" in message


# ------------------------------------------------------------------------------- the sessions


def _run_session(address: str) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _SESSION, address, str(REPO / "reward_plugins")],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # the report alone: no Ray output, no worker output
    return json.loads(lines[0]), result


def test_local_start_is_quiet_and_shut_down() -> None:
    report, result = _run_session("")
    assert result.stderr == ""
    assert report["cpus"] == 1
    assert report["py_modules"]
    assert report["after"] is False


def test_connection_by_address_is_quiet_and_shut_down(cluster: _Cluster) -> None:
    report, result = _run_session(f"127.0.0.1:{cluster.port()}")
    assert result.stderr == ""
    assert report["cpus"] == 1
    assert report["py_modules"]
    assert report["after"] is False
    assert report["after_interrupt"] is False


def test_existing_connection_is_used_and_kept(cluster: _Cluster) -> None:
    ray.init(
        address=f"127.0.0.1:{cluster.port()}", log_to_driver=False, logging_level=logging.ERROR
    )
    try:
        node = ray.get_runtime_context().get_node_id()
        # an unreachable address: the session must not try it
        with ray_session(f"127.0.0.1:{_free_port()}", cpus=1, quiet=True, timeout=1):
            assert ray.get_runtime_context().get_node_id() == node
        assert ray.is_initialized()
        assert ray.get_runtime_context().get_node_id() == node
    finally:
        ray.shutdown()
