"""Isolation through the whole reward server, over loopback HTTP: a hanging row, a segfaulting
row and a leaking scorer cost their own rows (the fallback dict, a failure of kind ``timeout``
or ``crash``), the workers are replaced, the other rows are scored exactly, and the server goes
on answering; then hostile clients (slow drips, oversized bodies, too many connections or rows,
an early disconnect) against the reward server, as ``test_retriever_server.py`` plays them.

The misbehaving scorer is ``tests/serve_plugins/rp_pool_probe.py``, installed by an entry point
(:mod:`serve_probe`); its responses starting ``HANG``, ``SEGV`` or ``LEAK`` hang, crash or leak.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from serve_probe import PROBE, probe_installed

from reward_plugins.router import route
from reward_plugins.runtime.http import running_in_thread
from reward_plugins.serve.service import (
    RewardServer,
    ServiceConfig,
    ServiceLimits,
    running_reward_server,
)

FALLBACK = -1.0
FAILED = {"score": FALLBACK, "length": 0.0}


def post(url: str, body: bytes | Any = None, timeout: float = 60) -> tuple[int, Any, Any]:
    """``(status, decoded JSON, headers)``: a GET when ``body`` is None; bytes sent as they
    are, anything else as JSON."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    call = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    call.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(call, timeout=timeout) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def connect(server: RewardServer) -> socket.socket:
    return socket.create_connection((server.http.host, server.http.port), timeout=30)


def receive_all(connection: socket.socket) -> bytes:
    data = b""
    while chunk := connection.recv(65536):
        data += chunk
    return data


def raw_request(body: bytes, path: str = "/score") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def expected(responses: list[str], gold: str = "paris") -> list[dict[str, Any]]:
    return [route(PROBE, PROBE, r, [gold], {}) for r in responses]


def pool_stats(server: RewardServer) -> dict[str, Any]:
    status, health, _ = post(server.base_url + "/health")
    assert status == 200
    return health["pool"]


@pytest.fixture(scope="module", autouse=True)
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with probe_installed(tmp_path_factory.mktemp("site")):
        yield


@pytest.fixture(scope="module")
def server(probe: None) -> Iterator[RewardServer]:
    """The probe behind two workers, a 1 s row timeout and a fallback reward of -1."""
    with running_reward_server(
        PROBE, workers=2, row_timeout=1.0, fallback_reward=FALLBACK, max_body_mb=16, max_rows=64
    ) as running:
        yield running


GOOD = [f"answer {i}" if i % 2 else "paris" for i in range(12)]


# --- isolation -----------------------------------------------------------------------------


def test_score_a_hanging_and_a_segfaulting_row_among_good_rows(server: RewardServer) -> None:
    before = pool_stats(server)["replaced"]
    responses = [*GOOD[:5], "HANG now", *GOOD[5:9], "SEGV now", *GOOD[9:]]
    rows = [{"data_source": PROBE, "solution_str": r, "ground_truth": ["paris"]}
            for r in responses]  # fmt: skip
    status, body, _ = post(server.base_url + "/score", {"rows": rows})
    assert status == 200 and body["keys"] == ["score", "length"]
    results, failures = body["results"], body["failures"]
    bad = {5: "timeout", 10: "crash"}
    for i, kind in bad.items():
        assert results[i] == FAILED
        assert failures[i]["kind"] == kind, failures[i]
    assert "row timeout 1 s" in failures[5]["message"]
    assert "SIGSEGV" in failures[10]["message"]
    good = [i for i in range(len(responses)) if i not in bad]
    assert [results[i] for i in good] == expected([responses[i] for i in good])
    assert [failures[i] for i in good] == [None] * len(good)
    # the server goes on answering, at once
    status, again, _ = post(server.base_url + "/score", {"rows": rows[:5]})
    assert status == 200 and again["results"] == expected(responses[:5])
    stats = pool_stats(server)
    replaced = {k: stats["replaced"].get(k, 0) - before.get(k, 0) for k in ("timeout", "crash")}
    assert replaced == {"timeout": 1, "crash": 1}
    status, health, _ = post(server.base_url + "/health")
    assert health["failures"]["timeout"] >= 1 and health["failures"]["crash"] >= 1


def test_get_reward_gives_failed_rows_the_fallback(server: RewardServer) -> None:
    before = pool_stats(server)["replaced"]
    responses = ["paris", "HANG", "answer", "SEGV", "paris"]
    prompts = [f"Question {i}? Answer: " for i in range(5)]
    status, body, _ = post(server.base_url + "/get_reward", {
        "query": [p + r for p, r in zip(prompts, responses, strict=True)],
        "prompts": prompts, "labels": ["paris"] * 5,
    })  # fmt: skip
    assert status == 200
    want = dict(zip((0, 2, 4), expected([responses[i] for i in (0, 2, 4)]), strict=True))
    assert body["rewards"] == [want[0]["score"], FALLBACK, want[2]["score"], FALLBACK, 1.0]
    assert body["rewards"][0] == 1.0 and body["rewards"][2] == 0.0
    assert body["extra_logs"]["failed"] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert body["extra_logs"]["length"] == [want[0]["length"], 0.0, want[2]["length"], 0.0,
                                            want[4]["length"]]  # fmt: skip
    replaced = pool_stats(server)["replaced"]
    assert replaced.get("timeout", 0) - before.get("timeout", 0) == 1
    assert replaced.get("crash", 0) - before.get("crash", 0) == 1


@pytest.mark.parametrize(("response", "kind"), [("HANG", "timeout"), ("SEGV", "crash")])
def test_verify_masks_a_failed_sample(server: RewardServer, response: str, kind: str) -> None:
    verify = {
        "responses_create_params": {"input": [{"role": "user", "content": "Capital?"}]},
        "response": {"output": [{"type": "message", "role": "assistant",
                                 "content": [{"type": "output_text", "text": response}]}]},
        "ground_truth": ["paris"],
    }  # fmt: skip
    status, body, _ = post(server.base_url + "/verify", verify)
    assert status == 200
    assert body["reward"] == FALLBACK and body["reward_components"] == FAILED
    assert body["mask_sample"] is True and body["failure_kind"] == f"reward_plugins:{kind}"
    assert body["failure_reason"]
    verify["response"]["output"][0]["content"][0]["text"] = "paris"  # type: ignore[index]
    status, body, _ = post(server.base_url + "/verify", verify)
    assert status == 200 and body["reward"] == 1.0 and "mask_sample" not in body


def test_a_leaking_scorer_is_recycled(probe: None) -> None:
    config = ServiceConfig(PROBE, {}, None, FALLBACK, ServiceLimits())
    leaky = RewardServer(config, workers=1, row_timeout=10.0, max_worker_rss_mb=250.0)
    with running_in_thread(leaky) as running:
        responses = [f"LEAK {i}" for i in range(60)]  # 8 MiB each: 480 MiB without recycling
        rows = [{"data_source": PROBE, "solution_str": r, "ground_truth": ["paris"]}
                for r in responses]  # fmt: skip
        status, body, _ = post(running.base_url + "/score", {"rows": rows})
        assert status == 200
        assert body["results"] == [{"score": 0.0, "length": len(r) / 1000} for r in responses]
        assert body["failures"] == [None] * 60
        stats = pool_stats(running)
        assert stats["replaced"].get("memory", 0) >= 1 and "crash" not in stats["replaced"]
        assert stats["workers_alive"] == 1 and stats["rows_scored"] == 60


# --- hostile clients -----------------------------------------------------------------------


@pytest.mark.slow  # a server of its own, waits out its 3 s read timeout
def test_a_slow_drip_does_not_stall_another_clients_score(probe: None) -> None:
    with running_reward_server(PROBE, workers=1, read_timeout=3.0) as running:
        drips = [connect(running) for _ in range(20)]
        for drip in drips:
            drip.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        rows = [{"data_source": PROBE, "solution_str": "paris", "ground_truth": ["paris"]}]
        status, body, _ = post(running.base_url + "/score", {"rows": rows})
        assert status == 200 and body["results"] == expected(["paris"])
        for drip in drips:  # still open: the answer did not wait for them
            drip.setblocking(False)
            with pytest.raises(BlockingIOError):
                drip.recv(1)
            drip.setblocking(True)
            drip.sendall(b'"r')  # still dripping: the deadline runs from the first byte
        answers = [receive_all(drip) for drip in drips]
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[0]
        assert b"the request did not arrive within 3 s (--read-timeout)" in answers[0]
        for drip in drips:
            drip.close()


def test_an_oversize_body_gets_a_readable_413(server: RewardServer) -> None:
    body = b'{"rows": [{"solution_str": "' + b"a" * (17 * 2**20) + b'"}]}'
    status, error, _ = post(server.base_url + "/score", body)
    assert status == 413
    assert error == {"error": f"the body is {len(body)} bytes, over 16777216 (--max-body-mb)"}
    assert post(server.base_url + "/health")[0] == 200


def test_max_rows_plus_one_gets_413(server: RewardServer) -> None:
    row = {"data_source": PROBE, "solution_str": "paris", "ground_truth": ["paris"]}
    status, error, _ = post(server.base_url + "/score", {"rows": [row] * 65})
    assert status == 413 and error == {"error": "65 rows, over 64 per request (--max-rows)"}
    prompts = ["Q: "] * 65
    batch = {"query": [p + "paris" for p in prompts], "prompts": prompts, "labels": ["paris"] * 65}
    status, error, _ = post(server.base_url + "/get_reward", batch)
    assert status == 413 and "65 rows, over 64 per request (--max-rows)" in error["error"]
    status, body, _ = post(server.base_url + "/score", {"rows": [row] * 64})
    assert status == 200 and body["results"] == expected(["paris"]) * 64


def test_too_many_connections_get_503(probe: None) -> None:
    with running_reward_server(PROBE, workers=1, max_connections=5, read_timeout=5.0) as running:
        held = [connect(running) for _ in range(5)]
        until = time.monotonic() + 30
        status, error, headers = post(running.base_url + "/health")
        while status == 200 and time.monotonic() < until:  # until the loop has accepted all 5
            time.sleep(0.01)
            status, error, headers = post(running.base_url + "/health")
        assert status == 503 and headers["Retry-After"] == "1"
        assert error == {"error": "over 5 connections; retry shortly"}
        for connection in held:
            connection.close()
        until = time.monotonic() + 30
        while (status := post(running.base_url + "/health")[0]) == 503 and time.monotonic() < until:
            time.sleep(0.01)  # until the loop has seen the 5 close
        assert status == 200


def test_too_many_requests_get_503(probe: None) -> None:
    with running_reward_server(PROBE, workers=1, max_requests=1) as running:
        rows = [{"data_source": PROBE, "solution_str": f"NAP {i}", "ground_truth": ["paris"]}
                for i in range(1000)]  # fmt: skip   # 2 ms a row: 2 s of scoring
        answers: list[Any] = []
        thread = threading.Thread(
            target=lambda: answers.append(post(running.base_url + "/score", {"rows": rows}))
        )
        thread.start()
        status, error, headers = post(running.base_url + "/health")
        while status == 200 and thread.is_alive():  # until the big request is in progress
            time.sleep(0.02)
            status, error, headers = post(running.base_url + "/health")
        thread.join()
    assert status == 503 and headers["Retry-After"] == "1"
    assert error == {"error": "over 1 requests in progress; retry shortly"}
    assert answers[0][0] == 200 and len(answers[0][1]["results"]) == 1000


def test_a_client_that_goes_away_leaves_one_line_and_no_traceback(
    server: RewardServer, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="reward_plugins.serve")
    body = json.dumps(
        {"rows": [{"data_source": PROBE, "solution_str": "paris", "ground_truth": ["paris"]}]}
    ).encode()
    client = connect(server)
    client.sendall(raw_request(body)[: -len(body) // 2])  # the headers, half the body
    time.sleep(0.2)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()  # a reset, in the middle of the request
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not caplog.records:
        time.sleep(0.05)
    assert post(server.base_url + "/health")[0] == 200
    records = [r for r in caplog.records if r.name.startswith("reward_plugins.serve")]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert re.fullmatch(
        r"127\.0\.0\.1:\d+: the client went away \(\w+Error\)", records[0].getMessage()
    )
    assert records[0].exc_info is None
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
