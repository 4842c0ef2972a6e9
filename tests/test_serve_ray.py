"""``serve-rewards --ray``: the reward service as a Ray Serve deployment of 2 replicas.

One local Ray instance (2 CPUs, no dashboard) and one Ray Serve application are started for the
module; the tests speak HTTP to Ray Serve's proxy: scores equal the router's, in-process,
requests reach both replicas, and refused requests are answered as the plain server answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import requests
from test_cli_helpers import router_result, training_rows

from reward_plugins.serve.ray_serve import ray_reward_server
from reward_plugins.serve.service import ServiceConfig, ServiceLimits, running_reward_server

MAX_BODY_MB = 1.0
"""A small body cap for both servers, so that the over-cap request is small too."""

OVER_THE_CAP = int(MAX_BODY_MB * 2**20) + 1


@pytest.fixture(scope="module")
def ray_url() -> Iterator[str]:
    config = ServiceConfig(
        scorer="compute_score",
        options={},
        data_source=None,
        limits=ServiceLimits(max_body_mb=MAX_BODY_MB),
    )
    with ray_reward_server(config, replicas=2, port=0, workers=1, cpus=2) as server:
        url = server.base_url
        assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*", url), url  # port 0: a free one
        yield url


@pytest.fixture(scope="module")
def plain_url() -> Iterator[str]:
    with running_reward_server("compute_score", max_body_mb=MAX_BODY_MB) as server:
        yield server.base_url


def _wire_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "data_source": row["data_source"],
            "solution_str": row["response"],
            "ground_truth": row["reward_model"]["ground_truth"],
            "extra_info": row["extra_info"],
        }
        for row in rows
    ]


def test_scores_equal_the_router_in_process(ray_url: str) -> None:
    rows = training_rows(64, seed=3)
    answer = requests.post(f"{ray_url}/score", json={"rows": _wire_rows(rows)}, timeout=120)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["results"] == [router_result(row) for row in rows]
    assert body["failures"] == [None] * len(rows)


def test_requests_reach_both_replicas(ray_url: str) -> None:
    replicas = set()
    pids = set()
    with requests.Session() as session:
        for _ in range(60):
            answer = session.get(f"{ray_url}/health", timeout=60)
            assert answer.status_code == 200, answer.text
            replica = _replica_of(answer.json())
            replicas.add(replica["id"])
            pids.add(replica["pid"])
    assert len(replicas) == 2
    assert len(pids) == 2


def _replica_of(health: dict[str, Any]) -> dict[str, Any]:
    """The replica that answered: the deployment adds it to the pool's counters."""
    replica = health["pool"]["replica"]
    assert isinstance(replica["id"], str) and isinstance(replica["pid"], int)
    return dict(replica)


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/score", b"not json", 400),
        ("POST", "/score", b'{"rows": 3}', 400),
        ("GET", "/no-such-path", b"", 404),
        ("GET", "/score", b"", 405),
        ("POST", "/score", b" " * OVER_THE_CAP, 413),
        ("POST", "/score", (b" " * 2**16,) * (OVER_THE_CAP // 2**16 + 1), 413),
    ],
    ids=[
        "not-json",
        "rows-not-a-list",
        "unknown-path",
        "wrong-method",
        "over-the-body-cap",
        "chunked-over-the-body-cap",
    ],
)
def test_refusals_equal_the_plain_servers(
    ray_url: str,
    plain_url: str,
    method: str,
    path: str,
    body: bytes | tuple[bytes, ...],
    status: int,
) -> None:
    """A tuple body is sent in chunks without ``Content-Length``: the cap is met while the body
    streams in."""
    answers = [
        requests.request(
            method,
            f"{url}{path}",
            data=iter(body) if isinstance(body, tuple) else body,
            timeout=60,
        )
        for url in (ray_url, plain_url)
    ]
    on_ray, plain = answers
    assert on_ray.status_code == plain.status_code == status
    assert orjson.loads(on_ray.content) == orjson.loads(plain.content)
    assert set(orjson.loads(on_ray.content)) == {"error"}
    assert on_ray.headers.get("Allow") == plain.headers.get("Allow")
    assert on_ray.headers["Content-Type"].startswith("application/json")
